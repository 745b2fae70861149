package reconciler

// Observers that decline attempts (AttemptFilter): the engine asks them
// once per attempt, on the worker, and carries the answer (an obsMask of
// those that declined) with the attempt's result to its commit, so that
// the started, finished and committed events go only to the observers
// that want the attempt, and are not built at all when none does.

// obsMask is a set of observers, by their index in Config.Observers (the
// first maskBits of them).
type obsMask uint64

// maskBits is how many observers an obsMask can name; later observers
// are not asked and get every attempt.
const maskBits = 64

// attemptKinds are the kinds of an attempt an AttemptFilter can decline.
const attemptKinds = kindSet(1<<EventStarted | 1<<EventFinished | 1<<EventCommitted)

// attemptAsker is an observer that may decline attempts, and its bit.
type attemptAsker struct {
	f   AttemptFilter
	bit obsMask
}

// add records observer ob, the i-th, which wants the kinds wants: in the
// per-kind masks, and among those asked when it filters attempts it
// would otherwise be told of.
func (o *observing[Obj]) add(i int, ob Observer, wants kindSet) {
	if i >= maskBits {
		o.tail |= wants
		return
	}
	for k := EventRead; k <= EventReleased; k++ {
		if wants.has(k) {
			o.byKind[k] |= 1 << i
		}
	}
	if f, ok := ob.(AttemptFilter); ok && wants&attemptKinds != 0 {
		o.filters = append(o.filters, attemptAsker{f: f, bit: 1 << i})
	}
}

// wantsOf reports whether any observer that did not decline the attempt
// (declined) wants events of kind k.
func (o *observing[Obj]) wantsOf(k EventKind, declined obsMask) bool {
	if declined == 0 {
		return o.wants.has(k)
	}
	return o.byKind[k]&^declined != 0 || o.tail.has(k)
}

// ask asks the attempt filters about an attempt on en, and returns those
// that declined it.
func (o *observing[Obj]) ask(op Op, en *opEntry[Obj]) obsMask {
	a := Attempt{Key: en.key, Revision: en.rev, Deleted: op == OpDelete || op == OpDeleteBatch,
		Attempt: en.failures + 1, Op: op, Why: en.class}
	var declined obsMask
	for i := range o.filters {
		if !o.wantsAttempt(o.filters[i].f, a) {
			declined |= o.filters[i].bit
		}
	}
	return declined
}

// wantsAttempt asks f, recovering its panic (which counts as wanting).
func (o *observing[Obj]) wantsAttempt(f AttemptFilter, a Attempt) (want bool) {
	defer func() {
		if p := recover(); p != nil {
			o.panicked(p)
			want = true
		}
	}()
	return f.WantsAttempt(a)
}
