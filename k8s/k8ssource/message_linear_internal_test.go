package k8ssource

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// shortenQuotedRef is the former shortenQuoted, quadratic on an
// unclosed '"' followed by many \": what the linear one must equal.
func shortenQuotedRef(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			b.WriteByte('"')
			s = s[1:]
			continue
		}
		v, _ := strconv.Unquote(q)
		if len(v) > MaxQuoted {
			b.WriteString(Quote(v))
		} else {
			b.WriteString(q)
		}
		s = s[len(q):]
	}
}

// perByte is the least time per byte of f(s) over trials runs, each
// repeating f until it has taken a millisecond.
func perByte(s string, f func(string) string, trials int) float64 {
	best := 0.0
	for range trials {
		n := 0
		start := time.Now()
		for time.Since(start) < time.Millisecond {
			f(s)
			n++
		}
		t := float64(time.Since(start)) / float64(n) / float64(len(s))
		if best == 0 || t < best {
			best = t
		}
	}
	return best
}

// growth is how much the time per byte of f grows when its input, an
// unclosed quote then the pattern repeated, grows eightfold: about 1 when f is linear, 8 when
// quadratic. It is the least ratio of several tries, so that a busy
// machine's pause does not count.
func growth(pattern string, small int, f func(string) string) float64 {
	mk := func(n int) string { return (`x"` + strings.Repeat(pattern, n/len(pattern)+1))[:n] }
	a, b := mk(small), mk(8*small)
	best := 0.0
	for range 3 {
		r := perByte(b, f, 5) / perByte(a, f, 5)
		if best == 0 || r < best {
			best = r
		}
	}
	return best
}

// hostile are inputs that made the quoted-string handling quadratic, or
// could: an unclosed quote before many escaped quotes, quotes alone,
// broken escapes, newlines inside quotes.
var hostile = []string{
	`\"`,
	`"`,
	`\"\`,
	`\x"`,
	"\\\"a\n",
	`\u12"`,
	`€\"`,
	`\\\"`,
}

// The handling of quoted strings is linear: eight times the input costs
// at most four times as much per byte (a quadratic one costs eight),
// whatever the input repeats.
func TestShortenQuotedLinear(t *testing.T) {
	for _, p := range hostile {
		if g := growth(p, 4<<10, shortenQuoted); g > 4 {
			t.Errorf("pattern %q: time per byte grew %.1fx for 8x the input", p, g)
		}
	}
}

// sanitize reads at most maxInput bytes: a message 64 times longer costs
// no more than four times as much in all (and gives the same result).
func TestSanitizeCutsFirst(t *testing.T) {
	p := `x"` + strings.Repeat(`\"`, 1<<20)
	small, big := p[:maxInput], p
	if sanitize(small) != sanitize(big) {
		t.Fatal("sanitize read past maxInput")
	}
	for range 3 {
		per := func(s string) float64 { return perByte(s, sanitize, 5) * float64(len(s)) }
		if r := per(big) / per(small); r < 4 {
			return
		}
	}
	t.Fatal("sanitize of 2 MiB costs over four times that of maxInput bytes")
}

// FuzzShortenQuotedLinear: whatever the fuzzer's pattern, repeated into
// a message, the quoted-string handling gives what the former one gave
// and its time per byte does not grow with the message (eight times the
// input: at most four times the time per byte, least of repeated
// trials).
func FuzzShortenQuotedLinear(f *testing.F) {
	for _, p := range hostile {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if p == "" || len(p) > 64 {
			return
		}
		s := `x"` + strings.Repeat(p, 256/len(p)+1)
		if got, want := shortenQuoted(s), shortenQuotedRef(s); got != want {
			t.Fatalf("shortenQuoted(%q) = %q, want %q", s, got, want)
		}
		if g := growth(p, 2<<10, shortenQuoted); g > 4 {
			t.Fatalf("pattern %q: time per byte grew %.1fx for 8x the input", p, g)
		}
	})
}
