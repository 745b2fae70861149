package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/cilium/hive/script"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// ScriptCmdName is the name of the script command the cells provide.
const ScriptCmdName = "reconciler/metrics"

func scriptUsage(detail ...string) script.CmdUsage {
	return script.CmdUsage{
		Summary: "Print the reconcilers' metrics",
		Args:    "[regexp]",
		Detail: append([]string{
			"Prints the metrics of every reconciler of the hive. With a regexp,",
			"only the metric lines it matches are printed.",
		}, detail...),
		RegexpArgs: func(rawArgs ...string) []int {
			if len(rawArgs) > 0 {
				return []int{0}
			}
			return nil
		},
	}
}

// filterArg compiles the optional regexp argument.
func filterArg(args []string) (*regexp.Regexp, error) {
	switch len(args) {
	case 0:
		return nil, nil
	case 1:
		re, err := regexp.Compile(args[0])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", script.ErrUsage, err)
		}
		return re, nil
	default:
		return nil, script.ErrUsage
	}
}

// prometheusScriptCmd prints the converge metrics of reg in the Prometheus
// text exposition format. A metric family is printed, with its HELP and
// TYPE lines, when at least one of its sample lines matches.
func prometheusScriptCmd(reg prometheus.Gatherer) script.Cmd {
	usage := scriptUsage("Output: the Prometheus text exposition format; other metrics of the registry are left out.")
	return script.Command(usage, func(s *script.State, args ...string) (script.WaitFunc, error) {
		re, err := filterArg(args)
		if err != nil {
			return nil, err
		}
		out, err := formatPrometheus(reg, re)
		if err != nil {
			return nil, err
		}
		return func(*script.State) (string, string, error) { return out, "", nil }, nil
	})
}

func formatPrometheus(reg prometheus.Gatherer, re *regexp.Regexp) (string, error) {
	families, err := reg.Gather()
	if err != nil {
		return "", fmt.Errorf("gathering metrics: %w", err)
	}
	var out, buf bytes.Buffer
	for _, mf := range families {
		if !strings.HasPrefix(mf.GetName(), Prefix) {
			continue
		}
		buf.Reset()
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			return "", fmt.Errorf("formatting %s: %w", mf.GetName(), err)
		}
		var header, samples []string
		for line := range strings.Lines(buf.String()) {
			switch {
			case strings.HasPrefix(line, "#"):
				header = append(header, line)
			case re == nil || re.MatchString(line):
				samples = append(samples, line)
			}
		}
		if len(samples) > 0 {
			out.WriteString(strings.Join(header, ""))
			out.WriteString(strings.Join(samples, ""))
		}
	}
	return out.String(), nil
}

// expvarScriptCmd prints e's variables as a JSON object with one line per
// value, keyed by its path ("module_id/name.operations_total.update.ok"),
// so that a regexp can pick out single values.
func expvarScriptCmd(e *ExpVar) script.Cmd {
	usage := scriptUsage("Output: a JSON object with one key per value, the path of the value in the expvar JSON.")
	return script.Command(usage, func(s *script.State, args ...string) (script.WaitFunc, error) {
		re, err := filterArg(args)
		if err != nil {
			return nil, err
		}
		out, err := formatExpVar(e, re)
		if err != nil {
			return nil, err
		}
		return func(*script.State) (string, string, error) { return out, "", nil }, nil
	})
}

func formatExpVar(e *ExpVar, re *regexp.Regexp) (string, error) {
	var tree map[string]any
	dec := json.NewDecoder(strings.NewReader(e.String()))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return "", fmt.Errorf("decoding expvar JSON: %w", err)
	}
	var lines []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, sub := range m {
				walk(prefix+"."+k, sub)
			}
			return
		}
		key, _ := json.Marshal(prefix[1:])
		line := fmt.Sprintf("%s: %v", key, v)
		if re == nil || re.MatchString(line) {
			lines = append(lines, line)
		}
	}
	walk("", tree)
	sort.Strings(lines)
	if len(lines) == 0 {
		return "{}\n", nil
	}
	return "{\n  " + strings.Join(lines, ",\n  ") + "\n}\n", nil
}
