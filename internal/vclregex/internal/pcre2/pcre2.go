//go:build pcre2 && cgo

// Package pcre2 binds the few libpcre2-8 calls that the vclregex tests use
// to cross-check Validate against the library Varnish uses. It is built
// only with -tags pcre2 (needs Debian's libpcre2-dev) and only tests import
// it: production code stays free of cgo.
package pcre2

/*
#cgo LDFLAGS: -lpcre2-8
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>

// rx_compile compiles a pattern the way Varnish's VRE_compile does (no
// options, no UTF); it returns NULL on failure.
static pcre2_code *rx_compile(const char *p, size_t n) {
	int err;
	PCRE2_SIZE off;
	return pcre2_compile((PCRE2_SPTR)p, n, 0, &err, &off, NULL);
}

// rx_match returns 1 for a match, 0 for none, <0 for an error.
static int rx_match(pcre2_code *re, const char *s, size_t n) {
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
	int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
	pcre2_match_data_free(md);
	if (rc >= 0) return 1;
	if (rc == PCRE2_ERROR_NOMATCH) return 0;
	return rc;
}

static void rx_free(pcre2_code *re) { pcre2_code_free(re); }
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Regexp is a compiled PCRE2 pattern.
type Regexp struct{ re *C.pcre2_code }

// Compile compiles expr with no options, as Varnish does.
func Compile(expr string) (*Regexp, error) {
	cs := C.CString(expr)
	defer C.free(unsafe.Pointer(cs))
	re := C.rx_compile(cs, C.size_t(len(expr)))
	if re == nil {
		return nil, errors.New("pcre2: pattern rejected")
	}
	return &Regexp{re}, nil
}

// Match reports whether s contains a match; ok is false when PCRE2 stopped
// with an error (such as a resource limit).
func (r *Regexp) Match(s string) (matched, ok bool) {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	rc := C.rx_match(r.re, cs, C.size_t(len(s)))
	return rc == 1, rc >= 0
}

// Free releases the compiled pattern.
func (r *Regexp) Free() { C.rx_free(r.re) }
