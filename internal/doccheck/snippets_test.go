package doccheck

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Go blocks of the docs. Whole programs are built elsewhere: the
// tutorial's blocks are quoted from example/tutorial
// (TestTutorialQuotesTheProgram), the README's quick start is
// example/quickstart's main.go (TestReadmeQuickStartIsThisProgram). The
// other blocks are fragments, written with the reader's own types (a
// File, a fileOps, a client) that no package has; they cannot be built
// alone. Each is checked for what can go stale: it parses (as
// declarations, statements or a list of expressions, with "..." standing
// for what the reader fills in), every name it takes from a converge
// package exists there, every field it sets in a converge struct is a
// field of it, and an interface it declares that a converge package
// declares has the same methods with the same signatures.

// convergePkgs maps the names the docs import converge's packages by to
// their directories.
var convergePkgs = map[string]string{
	"reconciler":    "reconciler",
	"statedbcompat": "reconciler/statedbcompat",
	"convergeindex": "index",
	"metrics":       "metrics",
	"health":        "health",
	"source":        "source",
	"dirsource":     "source/dirsource",
	"etcdsource":    "etcd/etcdsource",
	"leader":        "etcd/leader",
	"shard":         "etcd/shard",
	"fencing":       "etcd/fencing",
	"k8ssource":     "k8s/k8ssource",
	"lease":         "k8s/lease",
	"leaseshard":    "k8s/leaseshard",
	"apiservertest": "k8s/apiservertest",
	"convergeotel":  "otel",
}

// pkgIndex is what a package declares: its exported names, the fields
// of its structs, the methods of its interfaces.
type pkgIndex struct {
	names   map[string]bool
	fields  map[string]map[string]bool          // struct -> its fields (embedded ones by type name)
	methods map[string]map[string]*ast.FuncType // interface -> its methods
}

func indexPackage(t *testing.T, dir string) *pkgIndex {
	t.Helper()
	ix := &pkgIndex{names: map[string]bool{}, fields: map[string]map[string]bool{}, methods: map[string]map[string]*ast.FuncType{}}
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			ix.addDecl(d)
		}
	}
	if len(ix.names) == 0 {
		t.Fatalf("package %s declares nothing exported", dir)
	}
	return ix
}

func (ix *pkgIndex) addDecl(d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil {
			ix.names[d.Name.Name] = true
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.ValueSpec:
				for _, n := range s.Names {
					ix.names[n.Name] = true
				}
			case *ast.TypeSpec:
				ix.names[s.Name.Name] = true
				ix.addType(s.Name.Name, s.Type)
			}
		}
	}
}

func (ix *pkgIndex) addType(name string, typ ast.Expr) {
	switch typ := typ.(type) {
	case *ast.StructType:
		fields := map[string]bool{}
		for _, f := range typ.Fields.List {
			for _, n := range f.Names {
				fields[n.Name] = true
			}
			if len(f.Names) == 0 {
				fields[typeName(f.Type)] = true
			}
		}
		ix.fields[name] = fields
	case *ast.InterfaceType:
		methods := map[string]*ast.FuncType{}
		for _, m := range typ.Methods.List {
			if ft, ok := m.Type.(*ast.FuncType); ok && len(m.Names) == 1 {
				methods[m.Names[0].Name] = ft
			}
		}
		ix.methods[name] = methods
	}
}

// typeName is the name of an embedded field's type: T, *T, pkg.T, T[X].
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	}
	return ""
}

// ellipsis matches the "..." a fragment leaves for the reader, not a
// variadic "xs..." nor an array "[...]".
var ellipsis = regexp.MustCompile(`(^|[\s{(,:=])\.\.\.`)

// parseFragment parses a fragment as a file's declarations, a function's
// statements, or a list of expressions.
func parseFragment(text string) (*ast.File, error) {
	text = ellipsis.ReplaceAllString(text, "${1}fill_")
	var firstErr error
	for _, wrap := range []string{"package p\n%s\n", "package p\nfunc _() {\n%s\n}\n", "package p\nvar _ = []any{\n%s\n}\n"} {
		f, err := parser.ParseFile(token.NewFileSet(), "fragment.go", strings.Replace(wrap, "%s", text, 1), parser.SkipObjectResolution)
		if err == nil {
			return f, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// TestDocSnippets checks every Go fragment of the README and docs/ (the
// comment at the top of this file says what, and why not a build).
func TestDocSnippets(t *testing.T) {
	pkgs := map[string]*pkgIndex{}
	pkg := func(name string) *pkgIndex {
		if pkgs[name] == nil {
			pkgs[name] = indexPackage(t, convergePkgs[name])
		}
		return pkgs[name]
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	checked := 0
	for _, page := range pages {
		rel, _ := filepath.Rel(root, page)
		if rel == filepath.Join("docs", "tutorial.md") {
			continue // quoted from example/tutorial, which builds
		}
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range Blocks(src) {
			if b.Info != "go" || strings.HasPrefix(b.Text, "package ") {
				continue // a whole program: the README's quick start, built as example/quickstart
			}
			where := rel + ":" + itoa(b.Line)
			f, err := parseFragment(b.Text)
			if err != nil {
				t.Errorf("%s: the Go block does not parse: %v", where, err)
				continue
			}
			checkNames(t, where, f, pkg)
			checkInterfaces(t, where, f, pkg)
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("%d Go fragments checked: the pages or the pattern are broken", checked)
	}
}

// checkNames fails on a converge name the fragment uses that its package
// does not declare, and on a field it sets that the struct lacks.
func checkNames(t *testing.T, where string, f *ast.File, pkg func(string) *pkgIndex) {
	t.Helper()
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && convergePkgs[x.Name] != "" && !pkg(x.Name).names[n.Sel.Name] {
				t.Errorf("%s: %s.%s: package %s declares no %s", where, x.Name, n.Sel.Name, convergePkgs[x.Name], n.Sel.Name)
			}
		case *ast.CompositeLit:
			sel, ok := unwrapType(n.Type).(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok || convergePkgs[x.Name] == "" {
				return true
			}
			fields := pkg(x.Name).fields[sel.Sel.Name]
			for _, el := range n.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok && fields != nil {
					if k, ok := kv.Key.(*ast.Ident); ok && !fields[k.Name] {
						t.Errorf("%s: %s.%s has no field %s", where, x.Name, sel.Sel.Name, k.Name)
					}
				}
			}
		}
		return true
	})
}

// unwrapType strips a composite literal's type of its type arguments.
func unwrapType(e ast.Expr) ast.Expr {
	switch e := e.(type) {
	case *ast.IndexExpr:
		return e.X
	case *ast.IndexListExpr:
		return e.X
	}
	return e
}

// checkInterfaces fails when the fragment declares an interface that a
// converge package declares, with other methods or signatures.
func checkInterfaces(t *testing.T, where string, f *ast.File, pkg func(string) *pkgIndex) {
	t.Helper()
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range g.Specs {
			ts, ok := s.(*ast.TypeSpec)
			if !ok {
				continue
			}
			it, ok := ts.Type.(*ast.InterfaceType)
			if !ok {
				continue
			}
			compareInterface(t, where, ts.Name.Name, it, pkg)
		}
	}
}

func compareInterface(t *testing.T, where, name string, it *ast.InterfaceType, pkg func(string) *pkgIndex) {
	t.Helper()
	for alias := range convergePkgs {
		if _, err := os.Stat(filepath.Join(root, convergePkgs[alias])); err != nil {
			continue
		}
		want, ok := pkg(alias).methods[name]
		if !ok {
			continue
		}
		got := map[string]*ast.FuncType{}
		for _, m := range it.Methods.List {
			if ft, ok := m.Type.(*ast.FuncType); ok && len(m.Names) == 1 {
				got[m.Names[0].Name] = ft
			}
		}
		for m, ft := range want {
			switch g, ok := got[m]; {
			case !ok:
				t.Errorf("%s: interface %s lacks %s.%s's method %s", where, name, alias, name, m)
			case signature(g) != signature(ft):
				t.Errorf("%s: %s.%s is %s, the docs say %s", where, name, m, signature(ft), signature(g))
			}
		}
		for m := range got {
			if want[m] == nil {
				t.Errorf("%s: interface %s has a method %s that %s.%s does not", where, name, m, alias, name)
			}
		}
		return
	}
}

// signature prints a method's parameter and result types, without the
// parameters' names.
func signature(ft *ast.FuncType) string {
	types := func(fl *ast.FieldList) string {
		if fl == nil {
			return ""
		}
		var parts []string
		for _, f := range fl.List {
			var b bytes.Buffer
			printer.Fprint(&b, token.NewFileSet(), f.Type)
			for range max(1, len(f.Names)) {
				parts = append(parts, b.String())
			}
		}
		return strings.Join(parts, ", ")
	}
	return "(" + types(ft.Params) + ") (" + types(ft.Results) + ")"
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}
