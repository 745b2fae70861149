package main

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// nftErrorLine matches the first line of each of nft's error messages:
// "/dev/stdin:11:31-201: Error: comment too long, 128 characters maximum
// allowed". The location, when there is one, is the line (then columns,
// or for a span of lines "line:col-line:col") of the script the error is
// about; kernel errors name the line of the command the kernel refused.
var nftErrorLine = regexp.MustCompile(`(?m)^(?:\S*?:(\d+):\d+-(?:\d+:)?\d+: )?Error: (.*)$`)

// locate returns the rules on the lines nft's error names, each with
// nft's messages about it. It returns none when err is not nft's, or names
// no line of a rule (the base ruleset, or no line at all).
func (rs ruleset) locate(err error) map[*Rule]string {
	var ne *nftError
	if !errors.As(err, &ne) {
		return nil
	}
	bad := map[*Rule]string{}
	for _, m := range nftErrorLine.FindAllStringSubmatch(ne.stderr, -1) {
		line, _ := strconv.Atoi(m[1]) // 0, no line of the script, when there is none
		r, found := rs.lines[line]
		if !found {
			continue
		}
		if prev, seen := bad[r]; seen {
			bad[r] = prev + "; " + m[2]
		} else {
			bad[r] = m[2]
		}
	}
	return bad
}

// nftMessages returns the messages of nft's error without their
// locations, the script lines nft quotes and the word "Error": "comment
// too long, 128 characters maximum allowed". Anything else is returned as
// it is.
func nftMessages(err error) string {
	var ne *nftError
	if !errors.As(err, &ne) {
		return err.Error()
	}
	var msgs []string
	for _, m := range nftErrorLine.FindAllStringSubmatch(ne.stderr, -1) {
		msgs = append(msgs, m[2])
	}
	if len(msgs) == 0 {
		return strings.TrimSpace(ne.stderr)
	}
	return strings.Join(msgs, "; ")
}
