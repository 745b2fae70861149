package doccheck

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readme returns the README and the section of it under "## name".
func readme(t *testing.T, name string) []byte {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := Section(page, name)
	if !ok {
		t.Fatalf(`README.md has no "## %s" section`, name)
	}
	return section
}

// shBlocks returns the ```sh blocks of a section.
func shBlocks(section []byte) []Block {
	var out []Block
	for _, b := range Blocks(section) {
		if b.Info == "sh" {
			out = append(out, b)
		}
	}
	return out
}

// command splits a line of a command block into the command and its
// comment.
func command(line string) (cmd, comment string) {
	cmd, comment, _ = strings.Cut(line, "#")
	return strings.TrimSpace(cmd), strings.TrimSpace(comment)
}

// TestReadmeTwoCommands checks the first block of "The two commands"
// against what its lines name: the example builds and has the flags and
// defaults the section names, test.sh does what the line says, and the
// inner-loop command names packages that exist. (The example's session
// is run by TestReadmeExampleSession.)
func TestReadmeTwoCommands(t *testing.T) {
	section := readme(t, "The two commands")
	blocks := shBlocks(section)
	if len(blocks) < 2 {
		t.Fatalf(`"The two commands" has %d sh blocks, want the commands and the example's session`, len(blocks))
	}
	for _, line := range strings.Split(strings.TrimSpace(blocks[0].Text), "\n") {
		cmd, comment := command(line)
		switch {
		case cmd == "go run ./example":
			checkExampleFlags(t, section)
		case cmd == "scripts/test.sh":
			checkTestScript(t, comment)
		case strings.HasPrefix(cmd, "go test "):
			checkPackages(t, strings.Fields(cmd)[2:])
		default:
			t.Errorf("README's two commands: %q is a command this test does not know; teach it what to check", cmd)
		}
	}
}

// checkExampleFlags fails unless every --flag the section names is a flag
// of the example, and the defaults the section states are its defaults.
func checkExampleFlags(t *testing.T, section []byte) {
	help, err := exec.Command(goTool(), "run", filepath.Join(root, "example"), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./example --help: %v\n%s", err, help)
	}
	for _, flag := range regexp.MustCompile(`--[a-z][a-z-]+`).FindAllString(string(section), -1) {
		if flag != "--help" && !bytes.Contains(help, []byte(flag+" ")) {
			t.Errorf("README's two commands name %s, which go run ./example --help does not list", flag)
		}
	}
	for _, def := range []string{`(default "127.0.0.1:8080")`, `(default 10s)`, `(default "example-desired.json")`,
		`(default "example-state")`, `(default "example-shell.sock")`} {
		if !bytes.Contains(help, []byte(def)) {
			t.Errorf("the README states the example's default %s; --help does not:\n%s", def, help)
		}
	}
}

// checkTestScript fails unless scripts/test.sh exists, is executable and
// runs what the README's line says it runs.
func checkTestScript(t *testing.T, comment string) {
	fi, err := os.Stat(filepath.Join(root, "scripts/test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&0o111 == 0 {
		t.Error("scripts/test.sh is not executable")
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts/test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for claim, code := range map[string]string{
		"gofmt": "gofmt -l", "vet": "go vet ./...", "staticcheck": "staticcheck ./...", "-race": "go test -race",
	} {
		if strings.Contains(comment, claim) && !bytes.Contains(script, []byte(code)) {
			t.Errorf("the README says scripts/test.sh runs %s; it has no %q", claim, code)
		}
	}
}

// checkPackages fails unless every package pattern matches packages.
func checkPackages(t *testing.T, args []string) {
	for _, arg := range args {
		if strings.HasPrefix(arg, "-") {
			continue
		}
		cmd := exec.Command(goTool(), "list", arg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) == 0 {
			t.Errorf("the README's inner-loop command names %s: go list: %v\n%s", arg, err, out)
		}
	}
}

// TestReadmeModelMatchesCode fails unless every interface the README
// shows (outside the quick start, which its own test checks) has the
// methods, with the same signatures, of the reconciler package's type of
// that name.
func TestReadmeModelMatchesCode(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := interfaces(t, filepath.Join(root, "reconciler"))
	checked := 0
	for _, b := range Blocks(page) {
		if b.Info != "go" || strings.HasPrefix(b.Text, "package ") {
			continue
		}
		shown := parseInterfaces(t, "README.md", "package p\n"+b.Text)
		for name, methods := range shown {
			checked++
			if want, ok := code[name]; !ok {
				t.Errorf("README.md line %d shows %s, which the reconciler package does not declare", b.Line, name)
			} else if methods != want {
				t.Errorf("README.md line %d shows %s as\n%s\nthe reconciler package declares\n%s", b.Line, name, methods, want)
			}
		}
	}
	if checked == 0 {
		t.Error("README.md shows no interface; it shows Operations in the model section")
	}
}

// interfaces returns the interface types declared in the non-test Go
// files of dir, each as its methods' signatures, one a line.
func interfaces(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for name, methods := range parseInterfaces(t, f, string(src)) {
			out[name] = methods
		}
	}
	return out
}

// parseInterfaces parses Go source and returns its interface types'
// method signatures, comments left out.
func parseInterfaces(t *testing.T, name, src string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out := map[string]string{}
	ast.Inspect(file, func(n ast.Node) bool {
		spec, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		iface, ok := spec.Type.(*ast.InterfaceType)
		if !ok {
			return false
		}
		var b strings.Builder
		for _, m := range iface.Methods.List {
			for _, n := range m.Names {
				var sig bytes.Buffer
				if err := printer.Fprint(&sig, fset, m.Type); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&b, "%s%s\n", n.Name, strings.TrimPrefix(sig.String(), "func"))
			}
		}
		out[spec.Name.Name] = b.String()
		return false
	})
	return out
}

// TestReadmeQuickStartInNewModule runs the quick start's command block as
// written, in a new module: the program saved as main.go, the checkout's
// path for the placeholder. It checks that the program prints what the
// last line's comment says. It needs the Go module proxy, or a module
// cache that holds the pinned versions.
func TestReadmeQuickStartInNewModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a new module: not with -short")
	}
	section := readme(t, "Quick start")
	var program, commands *Block
	for _, b := range Blocks(section) {
		switch {
		case b.Info == "go" && program == nil:
			program = &b
		case b.Info == "sh" && commands == nil:
			commands = &b
		}
	}
	if program == nil || commands == nil {
		t.Fatal("the quick start needs its Go program and the sh block that runs it")
	}
	checkout, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lines := strings.Split(strings.TrimSpace(commands.Text), "\n")
	var script []string
	var want []string
	for i, line := range lines {
		cmd, comment := command(strings.ReplaceAll(line, "/path/to/your/converge/checkout", checkout))
		script = append(script, cmd)
		if i == 0 {
			// "and save the program above as main.go", in the directory
			// the first line made and entered.
			script = append(script, "cat > main.go <<'EOF'\n"+program.Text+"EOF")
		}
		if i == len(lines)-1 {
			want = strings.Split(comment, ", then ")
		}
	}
	cmd := exec.CommandContext(context.Background(), "sh", "-e", "-c", strings.Join(script, "\n"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the quick start's commands failed: %v\n%s", err, out)
	}
	last := string(out)
	for _, w := range want {
		i := strings.Index(last, strings.TrimSpace(w))
		if i < 0 {
			t.Fatalf("the quick start printed\n%s\nwithout %q (the README's comment says it prints %q)", out, w, want)
		}
		last = last[i:]
	}
}
