package retrysim

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimulation(t *testing.T) {
	sim := New(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	srv := httptest.NewServer(sim)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(query string) (int, error) {
		resp, err := client.Get(srv.URL + "/retry/x?" + query)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	tests := []struct {
		name  string
		query string
		want  []int // statuses in order; 0: the connection is reset
	}{
		{"fails twice with the code, then answers", "responseCode=503&succeedAfter=2&uuid=a", []int{503, 503, 200, 200}},
		{"succeedAfter 0 answers at once", "responseCode=500&succeedAfter=0&uuid=b", []int{200}},
		{"no responseCode resets the connection", "succeedAfter=1&uuid=c", []int{0, 200}},
		{"no uuid", "responseCode=500&succeedAfter=1", []int{400, 400}},
		{"no succeedAfter", "responseCode=500&uuid=d", []int{400}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, want := range tt.want {
				got, err := get(tt.query)
				if want == 0 {
					if err == nil {
						t.Fatalf("request %d: status %d, want a reset connection", i, got)
					}
					continue
				}
				if err != nil || got != want {
					t.Fatalf("request %d: status %d (%v), want %d", i, got, err, want)
				}
			}
		})
	}
	if got := sim.Requests("a"); got != 4 {
		t.Errorf("Requests(a) = %d, want 4", got)
	}
}

func TestCases(t *testing.T) {
	const head = "package tests\n\nfunc f() {\n\t_ = []struct{}{\n"
	const tail = "\t}\n}\n"
	tests := []struct {
		name, rows string
		want       []Case
		err        string
	}{
		{
			name: "one case",
			rows: `{name: "n", args: args{path: "/retry/a", retrySimulationConfig: url.Values{"responseCode": []string{"500"}, "succeedAfter": []string{"2"}}}, want: http.Response{StatusCode: 200}},`,
			want: []Case{{Name: "n", Path: "/retry/a", Code: 500, SucceedAfter: 2, Want: 200}},
		},
		{
			name: "a parameter not modelled",
			rows: `{name: "n", args: args{path: "/retry/a", retrySimulationConfig: url.Values{"delayRetry": []string{"1s"}}}, want: http.Response{StatusCode: 200}},`,
			err:  "retry simulation parameter delayRetry is not modelled",
		},
		{
			name: "a want field not modelled",
			rows: `{name: "n", args: args{path: "/retry/a"}, want: http.Response{StatusCodes: []int{200}}},`,
			err:  "want.StatusCodes is not modelled",
		},
		{
			name: "a value built in code",
			rows: `{name: name, args: args{path: "/retry/a"}, want: http.Response{StatusCode: 200}},`,
			err:  "not a literal",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "httproute-retry.go")
			if err := os.WriteFile(path, []byte(head+"\t\t"+tt.rows+"\n"+tail), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Cases(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Cases: %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				got[i].Pos = ""
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Cases = %+v, want %+v", got, tt.want)
			}
		})
	}
	q := Case{Code: 502, SucceedAfter: 1}.Query("u-1")
	if q != "responseCode=502&succeedAfter=1&uuid=u-1" {
		t.Errorf("Query = %q", q)
	}
}
