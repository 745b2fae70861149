package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"runtime/pprof"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The pprof label, and its value, of the goroutines whose CPU labelCPU
// measures: a rig started by startLabelled, its hive's goroutines and
// every goroutine they start.
const (
	cpuLabel      = "part"
	cpuLabelValue = "reconciler"
)

// profileHz is the sampling rate labelCPU asks for. At pprof's 100 Hz a
// sync-storm reconciler's tenth of a CPU-second was a dozen samples, and a
// run's figure moved by a third from sampling alone. The kernel may
// deliver fewer (Linux's per-thread CPU timers fire at most once a tick:
// 250 Hz with HZ=250), so labelCPU scales by the process's CPU time
// rather than trusting the sampling period.
const profileHz = 1000

// startLabelled starts side's rig with its goroutines labelled for
// labelCPU. The goroutine that drives it (writes, observers) is not.
func startLabelled(ctx context.Context, side string, opts rigOptions) (r rig, err error) {
	pprof.Do(ctx, pprof.Labels(cpuLabel, cpuLabelValue), func(ctx context.Context) {
		r, err = startRig(ctx, side, opts)
	})
	return r, err
}

// labelCPU runs fn under a CPU profile and returns the CPU time of the
// goroutines of a rig started by startLabelled: the reconciler, its hive
// and the table's own goroutines, with the GC assists of what they
// allocate, and not the writer that drives them nor the background GC.
// Unlike the process's CPU less a reference run's, it does not carry the
// run-to-run noise of the writer's wake-ups. It is the process's CPU time
// over fn times the share of the profile's samples that carry the label
// (where the process's CPU time is not measured, the labelled samples'
// own CPU). ok is false when a CPU profile is running already
// (-cpuprofile): then nothing is measured.
func labelCPU(fn func() error) (cpu time.Duration, ok bool, err error) {
	var buf bytes.Buffer
	if err := startCPUProfile(&buf, profileHz); err != nil {
		return 0, false, fn()
	}
	cpu0 := cpuTime()
	err = fn()
	process := cpuTime() - cpu0
	pprof.StopCPUProfile()
	if err != nil {
		return 0, false, err
	}
	labelled, all, err := labelledCPU(&buf, cpuLabel, cpuLabelValue)
	if err != nil {
		return 0, false, err
	}
	if process <= 0 || all <= 0 {
		return labelled, true, nil
	}
	return time.Duration(float64(process) * float64(labelled) / float64(all)), true, nil
}

// labelledCPU reads a CPU profile (gzipped profile.proto, as
// runtime/pprof writes it) and sums the CPU time of the samples labelled
// key=value, and of all samples.
func labelledCPU(r io.Reader, key, value string) (labelled, all time.Duration, err error) {
	p, err := readProfile(r)
	if err != nil {
		return 0, 0, err
	}
	cpuIndex := -1
	for i, t := range p.sampleTypes {
		if p.str(t) == "cpu" {
			cpuIndex = i
		}
	}
	if cpuIndex < 0 {
		return 0, 0, fmt.Errorf("CPU profile without a cpu sample type")
	}
	for _, s := range p.samples {
		if cpuIndex >= len(s.values) {
			continue
		}
		v := time.Duration(s.values[cpuIndex])
		all += v
		for _, l := range s.labels {
			if p.str(l[0]) == key && p.str(l[1]) == value {
				labelled += v
				break
			}
		}
	}
	return labelled, all, nil
}

// readProfile reads a gzipped profile.proto.
func readProfile(r io.Reader) (*profile, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	return parseProfile(b)
}

// profile is the part of profile.proto labelledCPU reads.
type profile struct {
	sampleTypes []int64 // each sample type's name, as a string index
	period      int64   // between samples, in the unit of period_type (ns for CPU)
	samples     []sample
	strings     []string
}

type sample struct {
	values []int64
	labels [][2]int64 // key and string value, as string indexes
}

func (p *profile) str(i int64) string {
	if i < 0 || int(i) >= len(p.strings) {
		return ""
	}
	return p.strings[i]
}

// parseProfile decodes the fields of a Profile message that labelledCPU
// needs: sample_type (1), sample (2), string_table (6) and period (12).
func parseProfile(b []byte) (*profile, error) {
	p := &profile{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		if typ == protowire.VarintType && num == 12 {
			p.period = int64(x)
		}
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1: // ValueType: type (1)
			return eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if num == 1 {
					p.sampleTypes = append(p.sampleTypes, int64(x))
				}
				return nil
			})
		case 2:
			s, err := parseSample(v)
			p.samples = append(p.samples, s)
			return err
		case 6:
			p.strings = append(p.strings, string(v))
		}
		return nil
	})
	return p, err
}

// parseSample decodes a Sample: value (2, packed or not) and label (3:
// key (1), str (2)).
func parseSample(b []byte) (sample, error) {
	var s sample
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 2 && typ == protowire.VarintType:
			s.values = append(s.values, int64(x))
		case num == 2 && typ == protowire.BytesType:
			for len(v) > 0 {
				x, n := protowire.ConsumeVarint(v)
				if n < 0 {
					return protowire.ParseError(n)
				}
				s.values, v = append(s.values, int64(x)), v[n:]
			}
		case num == 3 && typ == protowire.BytesType:
			var l [2]int64
			err := eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if num == 1 || num == 2 {
					l[num-1] = int64(x)
				}
				return nil
			})
			s.labels = append(s.labels, l)
			return err
		}
		return nil
	})
	return s, err
}

// eachField calls fn with each field of a message: its bytes for a
// length-delimited field, its value for a varint.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
