package reconciler

// Row returns the status as a table cell (statedb's TableRow, db/show):
// the kind, then ": " and the error message if there is one, as in
// "Done" or "Error: connection refused". Unlike String it leaves out the
// age, so it changes only when the status does and a script test's db/cmp
// can match it. (StatusSet.String has no age either.)
func (s Status) Row() string {
	if s.Error == "" {
		return s.Kind.String()
	}
	return s.Kind.String() + ": " + s.Error
}
