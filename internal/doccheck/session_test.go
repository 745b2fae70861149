package doccheck

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// step checks one line of the README's session with the example: out is
// what the line printed, rerun runs the line again.
type step struct {
	match *regexp.Regexp
	check func(t *testing.T, s *session, out string, rerun func() string)
}

// session is the state of a run of the README's session.
type session struct {
	bin, dir string
	args     []string
	agent    *agent
	refusal  string // the README's quote of the refusal to start
}

// sessionSteps are the lines the README's session may have, and what
// each must do.
var sessionSteps = []step{
	{regexp.MustCompile(`^curl -X PUT \S+/files/hello\.txt `), func(t *testing.T, _ *session, out string, _ func() string) {
		if !strings.Contains(out, `"kind": "Pending"`) {
			t.Errorf("PUT answered\n%s\nwithout the Pending status the README promises", out)
		}
	}},
	{regexp.MustCompile(`^curl \S+/files/hello\.txt$`), func(t *testing.T, _ *session, out string, rerun func() string) {
		eventually(t, 30*time.Second, func() string {
			if strings.Contains(out, `"kind": "Done"`) {
				return ""
			}
			out = rerun()
			return "hello.txt is not Done: " + out
		})
	}},
	{regexp.MustCompile(`^ls -l example-state/$`), func(t *testing.T, _ *session, out string, _ func() string) {
		if !strings.Contains(out, "hello.txt") {
			t.Errorf("ls -l example-state/ printed\n%s\nwithout hello.txt", out)
		}
	}},
	{regexp.MustCompile(`^echo tampered > example-state/hello\.txt$`), func(t *testing.T, s *session, _ string, _ func() string) {
		// Repaired by refresh on the example's 10s interval: wait for it.
		eventually(t, 30*time.Second, func() string {
			data, err := os.ReadFile(filepath.Join(s.dir, "example-state", "hello.txt"))
			if err == nil && string(data) == "hello\n" {
				return ""
			}
			return "example-state/hello.txt is not repaired: " + string(data)
		})
	}},
	{regexp.MustCompile(`^curl \S+/healthz$`), func(t *testing.T, _ *session, out string, _ func() string) {
		if strings.TrimSpace(out) != "ok" {
			t.Errorf("/healthz answered %q, want ok", out)
		}
	}},
	{regexp.MustCompile(`^curl \S+/metrics$`), func(t *testing.T, _ *session, out string, _ func() string) {
		if !strings.Contains(out, "converge_reconciler_") {
			t.Errorf("/metrics has no converge_reconciler_* series:\n%.500s", out)
		}
	}},
	{regexp.MustCompile(` shell reconciler/status$`), func(t *testing.T, _ *session, out string, _ func() string) {
		if !strings.Contains(out, "desired-files") {
			t.Errorf("reconciler/status over the shell printed\n%s\nwithout the desired-files reconciler", out)
		}
	}},
}

// rmStep is the reset line: it runs with the agent stopped (its comment
// says so), and the test first checks the refusal the README quotes.
var rmStep = regexp.MustCompile(`^rm -r example-state example-desired\.json$`)

// TestReadmeExampleSession runs the README's session with the example
// agent, line by line, against the built agent on a free port, and checks
// what each line's comment promises; then the reset, and the refusal to
// start that the README quotes.
func TestReadmeExampleSession(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example agent for about 15s: not with -short")
	}
	needsTools(t, "sh", "curl")
	section := readme(t, "The two commands")
	blocks := shBlocks(section)
	if len(blocks) < 2 {
		t.Fatal(`"The two commands" has no session block after the commands`)
	}
	m := regexp.MustCompile(`refuse \("([^"]+)"\)`).FindSubmatch(section)
	if m == nil {
		t.Fatal(`"The two commands" does not quote the refusal to start ("refuse (\"...\")")`)
	}
	port := freePort(t)
	s := &session{bin: buildExample(t), dir: t.TempDir(), args: portArgs(port), refusal: oneLine(string(m[1]))}
	s.agent = startAgent(t, s.bin, s.dir, s.args...)
	s.agent.ready(t)
	addr := s.args[1] // 127.0.0.1:port
	for _, line := range strings.Split(strings.TrimSpace(blocks[1].Text), "\n") {
		cmd, _ := command(line)
		run := strings.ReplaceAll(strings.ReplaceAll(cmd, "localhost:8080", addr), "go run ./example", s.bin)
		if rmStep.MatchString(cmd) {
			s.reset(t, run)
			continue
		}
		st := findStep(cmd)
		if st == nil {
			t.Errorf("the README's session has %q, which this test does not know; teach it what to check", cmd)
			continue
		}
		rerun := func() string {
			out, err := shell(t.Context(), s.dir, run)
			if err != nil {
				t.Fatalf("%s: %v\n%s", cmd, err, out)
			}
			return out
		}
		st.check(t, s, rerun(), rerun)
	}
}

func findStep(cmd string) *step {
	for i := range sessionSteps {
		if sessionSteps[i].match.MatchString(cmd) {
			return &sessionSteps[i]
		}
	}
	return nil
}

// reset stops the agent, checks that a start without the desired-state
// file is refused as the README quotes, then runs the README's reset line
// and checks that the agent starts afresh.
func (s *session) reset(t *testing.T, rm string) {
	s.agent.stop(t)
	desired := filepath.Join(s.dir, "example-desired.json")
	aside := filepath.Join(t.TempDir(), "desired.json")
	if err := os.Rename(desired, aside); err != nil {
		t.Fatal(err)
	}
	out, err := startAgent(t, s.bin, s.dir, s.args...).exit(t)
	if err == nil || !strings.Contains(oneLine(out), s.refusal) {
		t.Errorf("without example-desired.json the agent ended with %v and said\n%s\nnot the README's %q", err, out, s.refusal)
	}
	if err := os.Rename(aside, desired); err != nil {
		t.Fatal(err)
	}
	if out, err := shell(context.Background(), s.dir, rm); err != nil {
		t.Fatalf("%s: %v\n%s", rm, err, out)
	}
	a := startAgent(t, s.bin, s.dir, s.args...)
	a.ready(t)
	a.stop(t)
}

var spaces = regexp.MustCompile(`\s+`)

func oneLine(s string) string { return spaces.ReplaceAllString(s, " ") }
