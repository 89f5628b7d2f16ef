// Package vclregex checks regular expressions before Varnish compiles them
// with PCRE2: Validate for the path, header and query matches of routes
// (Go's regexp and PCRE2 must read them alike, so that plan-time checks and
// varnishd agree), ValidateBan for the path expressions of cache
// invalidations (they must not hit varnishd's match limits).
package vclregex

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
)

// posixClassRE is a POSIX class inside a bracket expression.
var posixClassRE = regexp.MustCompile(`^\[:\^?[a-z]+:\]`)

// maxRegexSize bounds the expanded size of a regular expression (a{1000}
// counts 1000), so that no accepted expression is expensive to compile in
// varnishd or here.
const maxRegexSize = 10000

// maxRegexLength bounds regular expressions in matches (ghost.schema.json
// limits path values to 1024 characters).
const maxRegexLength = 1024

// Validate reports whether expr is in the regular expression subset
// varnishgw accepts: expressions that Go's regexp/syntax accepts in Perl mode
// and that PCRE2 (as used by Varnish, without the UTF flag) parses with the
// same meaning, so that plan-time validation and varnishd agree. The subset
// rejects:
//
//   - anything Go rejects: backreferences, lookaround, atomic groups,
//     possessive quantifiers, \C, \K, \R, \X, \G, \Z, \h, \N, (?x), callouts;
//   - escapes whose meaning differs: \1-\9 (backreference or octal in PCRE2),
//     \v (vertical-space class in PCRE2, one character in Go), \p and \P
//     (Unicode classes, byte-wise without PCRE2_UTF);
//   - "{,n}", a literal in Go but a quantifier in PCRE2 10.43 and later;
//   - "[:", "[." and "[=" except for POSIX classes such as [[:alpha:]]
//     inside a bracket expression (PCRE2 reads them as POSIX syntax);
//   - a quantifier on an assertion such as $* or \b+ (PCRE2 rejects it);
//   - expressions expanding to more than maxRegexSize instructions;
//   - non-ASCII and control characters (PCRE2 without UTF matches bytes, Go
//     matches runes), so "." and classes mean the same in both.
//
// Known, accepted differences: "$" also matches before a final newline in
// PCRE2, and "\s" also matches a vertical tab; neither can occur in a request
// path or header value that Varnish accepts.
func Validate(expr string) error {
	if expr == "" {
		return fmt.Errorf("empty regular expression")
	}
	if len(expr) > maxRegexLength {
		return fmt.Errorf("regular expression is %d bytes long, the limit is %d", len(expr), maxRegexLength)
	}
	inClass := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c >= 0x80:
			return fmt.Errorf("non-ASCII byte 0x%02x at offset %d: Varnish matches bytes, match the percent-encoded form instead", c, i)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("control character 0x%02x at offset %d: write it as an escape such as \\t or \\x00", c, i)
		case c == '\\':
			if i+1 >= len(expr) {
				return fmt.Errorf("trailing backslash")
			}
			i++
			switch n := expr[i]; {
			case n >= '1' && n <= '9':
				return fmt.Errorf(`escape \%c at offset %d is a backreference or octal escape in PCRE2: use \x{..} for a character code`, n, i-1)
			case n == 'v':
				return fmt.Errorf(`escape \v at offset %d means vertical whitespace in PCRE2 but one character in Go: use \x0b`, i-1)
			case n == 'p' || n == 'P':
				return fmt.Errorf(`the Unicode class \%c at offset %d is not supported: Varnish matches bytes; write the bytes or ranges you mean`, n, i-1)
			case n == 'Q':
				// \Q...\E quotes literally in both; skip to \E.
				end := strings.Index(expr[i+1:], `\E`)
				if end < 0 {
					i = len(expr)
				} else {
					i += 1 + end + 1
				}
			}
		case c == '{' && i+1 < len(expr) && expr[i+1] == ',' && !inClass:
			return fmt.Errorf(`"{," at offset %d is a literal in Go but a quantifier in PCRE2: escape the brace as \{ or write {0,n}`, i)
		case c == '[' && !inClass:
			inClass = true
			if i+1 < len(expr) && strings.IndexByte(":.=", expr[i+1]) >= 0 {
				return fmt.Errorf(`"[%c" at offset %d reads as a POSIX class in PCRE2: escape it as [\%c`, expr[i+1], i, expr[i+1])
			}
			// A leading ^ and a leading ] are part of the class.
			if i+1 < len(expr) && expr[i+1] == '^' {
				i++
			}
			if i+1 < len(expr) && expr[i+1] == ']' {
				i++
			}
		case c == '[' && inClass && i+1 < len(expr) && strings.IndexByte(":.=", expr[i+1]) >= 0:
			m := posixClassRE.FindString(expr[i:])
			if m == "" {
				return fmt.Errorf(`"[%c" at offset %d inside a class is not a POSIX class like [:alpha:]: escape it as \[`, expr[i+1], i)
			}
			i += len(m) - 1
		case c == ']' && inClass:
			inClass = false
		}
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return fmt.Errorf("not in the supported PCRE2/Go subset: %w", err)
	}
	if n := regexSize(re); n > maxRegexSize {
		return fmt.Errorf("regular expression expands to more than %d instructions (counted repeats multiply): simplify it", maxRegexSize)
	}
	if err := checkRegexTree(re); err != nil {
		return err
	}
	return nil
}

// checkRegexTree rejects parsed constructs whose meaning differs.
func checkRegexTree(re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		switch re.Sub[0].Op {
		case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
			syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpEmptyMatch:
			return fmt.Errorf("quantifier on an assertion or empty group (%s): PCRE2 rejects it; remove the quantifier", re.Sub[0])
		}
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r >= 0x80 {
				return fmt.Errorf("character U+%04X is outside ASCII: Varnish matches bytes", r)
			}
		}
	case syntax.OpCharClass:
		// Pairs of ranges; upper bounds reach U+10FFFF in negated classes,
		// and case folding adds U+017F and U+212A to [s] and [k].
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if lo := re.Rune[i]; lo >= 0x80 && !foldRune(lo) {
				return fmt.Errorf("character class reaches U+%04X, outside ASCII: Varnish matches bytes", lo)
			}
		}
	}
	for _, sub := range re.Sub {
		if err := checkRegexTree(sub); err != nil {
			return err
		}
	}
	return nil
}

// foldRune reports whether r is one of the non-ASCII runes (or the rune after
// one) that Go's case folding puts into ASCII classes: U+017F (long s) and
// U+212A (Kelvin sign).
func foldRune(r rune) bool {
	return r == 0x17f || r == 0x180 || r == 0x212a || r == 0x212b
}

// regexSize estimates the number of instructions re compiles to, saturating
// above maxRegexSize.
func regexSize(re *syntax.Regexp) int {
	n := 1
	switch re.Op {
	case syntax.OpLiteral:
		n = len(re.Rune)
	case syntax.OpRepeat:
		times := re.Max
		if times < 0 {
			times = re.Min + 1
		}
		n = 1 + times*regexSize(re.Sub[0])
	default:
		for _, sub := range re.Sub {
			n += regexSize(sub)
		}
	}
	return min(n, maxRegexSize+1)
}

// Limits of ValidateBan, measured with the PCRE2 limits varnishd
// matches bans under (pcre2_match_limit=10000, pcre2_depth_limit=20 by
// default): 19 groups in a row, 20 "a?" in a row or (?:ab) repeated 19
// times on a matching path already end the match with PCRE2's depth limit.
const (
	maxBanRepeat      = 1000 // the largest m of {n,m}
	maxBanGroupRepeat = 10   // the largest m of a group's {n,m}
	maxBanBranches    = 12   // groups, "|" and quantifiers in all
)

// ValidateBan is Validate plus a refusal of what can make PCRE2's
// matching time or depth explode in a varnishd ban. varnishd's
// ban_evaluate() asserts that a match ends without an error (seen on 7.1
// and 7.7): a ban whose regex hits PCRE2's match or depth limit on one
// cached object's header panics the cache child and empties the cache.
// Since whoever can get a path cached chooses that header, the check is on
// the expression alone, read as PCRE2 reads it (Go's parser folds a|b into
// [ab], PCRE2 does not), and conservative:
//
//   - a repeated (*, +, {n,m} with m > 1) group that contains a quantifier
//     or "|" ("star height" above one), such as (a|a)* or (a+)+;
//   - a group repeated without bound or more than maxBanGroupRepeat times,
//     such as (?:ab)*: each repetition of a group is one level of PCRE2's
//     depth;
//   - {n,m} with m above maxBanRepeat;
//   - more than maxBanBranches groups, "|" and quantifiers in all.
func ValidateBan(expr string) error {
	if err := Validate(expr); err != nil {
		return err
	}
	return checkBacktracking(expr)
}

// banGroup is what checkBacktracking knows of an open group.
type banGroup struct {
	start           int  // offset of "("
	alt, quantified bool // holds "|" or a quantifier, at any depth
}

// checkBacktracking scans expr, which Validate accepted, as PCRE2
// parses it.
func checkBacktracking(expr string) error {
	const fix = "repeat single characters or classes only (such as [^/]* or [a-z0-9-]+), or use pathPrefix"
	var stack []banGroup
	branches := 0
	// atom is the item a quantifier applies to: -1 none (start, "(" or
	// "|"), 0 a single character or class, 1 the group just closed.
	atom := -1
	var closed banGroup
	mark := func(alt bool) {
		for i := range stack {
			if alt && i == len(stack)-1 {
				stack[i].alt = true
			} else if !alt {
				stack[i].quantified = true
			}
		}
	}
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch c {
		case '\\':
			i++
			switch expr[i] {
			case 'Q':
				end := strings.Index(expr[i+1:], `\E`)
				if end < 0 {
					i = len(expr)
				} else {
					i += end + 2
				}
			case 'x':
				if i+1 < len(expr) && expr[i+1] == '{' {
					i += strings.IndexByte(expr[i:], '}')
				} else {
					for n := 0; n < 2 && i+1 < len(expr) && strings.IndexByte("0123456789abcdefABCDEF", expr[i+1]) >= 0; n++ {
						i++
					}
				}
			}
			atom = 0
		case '[':
			i = classEnd(expr, i)
			atom = 0
		case '(':
			start := i
			switch {
			case strings.HasPrefix(expr[i:], "(?P<") || strings.HasPrefix(expr[i:], "(?<"):
				i += strings.IndexByte(expr[i:], '>') // a named group
			case strings.HasPrefix(expr[i:], "(?"):
				// flags: (?i) sets them, (?i:...) and (?:...) are groups
				i += strings.IndexAny(expr[i:], ":)")
				if expr[i] == ')' {
					continue
				}
			}
			stack = append(stack, banGroup{start: start})
			branches++
			atom = -1
		case ')':
			closed = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if closed.alt {
				for j := range stack {
					stack[j].alt = true
				}
			}
			atom = 1
		case '|':
			if len(stack) > 0 {
				mark(true)
			}
			branches++
			atom = -1
		case '*', '+', '?', '{':
			lo, hi, n := quantifier(expr[i:])
			if n == 0 { // a literal "{"
				atom = 0
				continue
			}
			q := i
			i += n - 1
			if i+1 < len(expr) && expr[i+1] == '?' { // lazy
				i++
			}
			branches++
			if hi > maxBanRepeat {
				return fmt.Errorf("the repeat count %d of %s is above %d: write a smaller count, %s", hi, expr[q:q+n], maxBanRepeat, fix)
			}
			if atom == 1 && (hi < 0 || hi > 1) {
				group := expr[closed.start:q]
				switch {
				case closed.alt || closed.quantified:
					return fmt.Errorf("the group %s is repeated and holds a quantifier or \"|\": such nesting can make the match take exponential time and crash varnishd's cache child; %s", group, fix)
				case hi < 0 || hi > maxBanGroupRepeat:
					return fmt.Errorf("the group %s is repeated %s: each repetition of a group is a level of PCRE2's depth limit, whose error crashes varnishd's cache child; repeat it at most %d times, %s", group, repeatText(lo, hi), maxBanGroupRepeat, fix)
				}
			}
			mark(false)
			atom = -1
		default:
			atom = 0
		}
	}
	if branches > maxBanBranches {
		return fmt.Errorf("%d groups, \"|\" and quantifiers in all, the limit is %d: PCRE2's depth limit, whose error crashes varnishd's cache child, allows few; %s", branches, maxBanBranches, fix)
	}
	return nil
}

// repeatText describes the count of a quantifier.
func repeatText(lo, hi int) string {
	if hi < 0 {
		return fmt.Sprintf("%d or more times", lo)
	}
	return fmt.Sprintf("up to %d times", hi)
}

// quantifier reads the quantifier at the start of s: its bounds (hi -1
// without bound) and length; n is 0 when s starts with a "{" that is a
// literal.
func quantifier(s string) (lo, hi, n int) {
	switch s[0] {
	case '*':
		return 0, -1, 1
	case '+':
		return 1, -1, 1
	case '?':
		return 0, 1, 1
	}
	m := repeatRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, 0
	}
	lo = atoiSat(m[1])
	switch {
	case m[2] == "":
		hi = lo
	case m[3] == "":
		hi = -1
	default:
		hi = atoiSat(m[3])
	}
	return lo, hi, len(m[0])
}

// repeatRE is a counted quantifier.
var repeatRE = regexp.MustCompile(`^\{([0-9]+)(,([0-9]*))?\}`)

// atoiSat parses digits, saturating at a million.
func atoiSat(s string) int {
	n := 0
	for _, d := range s {
		n = min(n*10+int(d-'0'), 1_000_000)
	}
	return n
}

// classEnd returns the offset of the "]" that closes the bracket
// expression starting at expr[i].
func classEnd(expr string, i int) int {
	i++
	if i < len(expr) && expr[i] == '^' {
		i++
	}
	if i < len(expr) && expr[i] == ']' {
		i++
	}
	for ; i < len(expr); i++ {
		switch {
		case expr[i] == '\\':
			i++
		case expr[i] == '[' && i+1 < len(expr) && expr[i+1] == ':':
			if m := posixClassRE.FindString(expr[i:]); m != "" {
				i += len(m) - 1
			}
		case expr[i] == ']':
			return i
		}
	}
	return i
}
