package routing

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

// ValidateRegex reports whether expr is in the regular expression subset
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
func ValidateRegex(expr string) error {
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
