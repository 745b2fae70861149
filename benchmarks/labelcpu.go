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

// startLabelled starts side's rig with its goroutines labelled for
// labelCPU. The goroutine that drives it (writes, observers) is not.
func startLabelled(ctx context.Context, side string, opts rigOptions) (r rig, err error) {
	pprof.Do(ctx, pprof.Labels(cpuLabel, cpuLabelValue), func(ctx context.Context) {
		r, err = startRig(ctx, side, opts)
	})
	return r, err
}

// labelCPU runs fn under a CPU profile and returns the CPU time sampled in
// the goroutines of a rig started by startLabelled: the reconciler, its
// hive and the table's own goroutines, with the GC assists of what they
// allocate, and not the writer that drives them nor the background GC.
// Unlike the process's CPU less a reference run's, it does not carry the
// run-to-run noise of the writer's wake-ups. The profile samples at 100 Hz
// (each sample is 10ms of CPU): fine for the tenths of a CPU-second it
// measures, not for less. ok is false when a CPU profile is running
// already (-cpuprofile): then nothing is measured.
func labelCPU(fn func() error) (cpu time.Duration, ok bool, err error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return 0, false, fn()
	}
	err = fn()
	pprof.StopCPUProfile()
	if err != nil {
		return 0, false, err
	}
	cpu, err = labelledCPU(&buf, cpuLabel, cpuLabelValue)
	return cpu, err == nil, err
}

// labelledCPU reads a CPU profile (gzipped profile.proto, as
// runtime/pprof writes it) and sums the CPU time of the samples labelled
// key=value.
func labelledCPU(r io.Reader, key, value string) (time.Duration, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return 0, err
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return 0, err
	}
	p, err := parseProfile(b)
	if err != nil {
		return 0, err
	}
	cpuIndex := -1
	for i, t := range p.sampleTypes {
		if p.str(t) == "cpu" {
			cpuIndex = i
		}
	}
	if cpuIndex < 0 {
		return 0, fmt.Errorf("CPU profile without a cpu sample type")
	}
	var total int64
	for _, s := range p.samples {
		for _, l := range s.labels {
			if p.str(l[0]) == key && p.str(l[1]) == value && cpuIndex < len(s.values) {
				total += s.values[cpuIndex]
				break
			}
		}
	}
	return time.Duration(total), nil
}

// profile is the part of profile.proto labelledCPU reads.
type profile struct {
	sampleTypes []int64 // each sample type's name, as a string index
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
// needs: sample_type (1), sample (2) and string_table (6).
func parseProfile(b []byte) (*profile, error) {
	p := &profile{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
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
