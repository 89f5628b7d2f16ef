package ghostadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	retryablehttp "github.com/hashicorp/go-retryablehttp"
)

// ReloadPath is ghost's reload endpoint on the admin listener.
const ReloadPath = "/.varnish-ghost/reload"

// ReloadAnswer is ghost's JSON answer to a reload request.
type ReloadAnswer struct {
	Status     string  `json:"status"`
	Generation int64   `json:"generation"`
	VHosts     int     `json:"vhosts"`
	Routes     int     `json:"routes"`
	Endpoints  int     `json:"endpoints"`
	Backends   int     `json:"backends"`
	DurationMS float64 `json:"duration_ms"`
	Error      string  `json:"error,omitempty"`
}

// RejectedError is returned when ghost answered the reload request and
// refused the file (or the request): retrying cannot help, the document
// must change. Message is ghost's error, naming the offending field.
type RejectedError struct {
	StatusCode int
	Message    string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("ghost rejected ghost.json (HTTP %d): %s", e.StatusCode, e.Message)
}

// Reloader asks ghost to re-read ghost.json over the loopback admin socket,
// retrying transport errors and 5xx answers that are not a rejection with
// bounded exponential backoff.
type Reloader struct {
	url    string
	client *retryablehttp.Client
}

// ReloaderConfig configures NewReloader.
type ReloaderConfig struct {
	// Addr is ghost's admin listener, host:port (-a ghost-admin=ADDR).
	Addr string
	// RetryMax is the number of retries after the first attempt
	// (default 4; negative: none); RetryWaitMin and RetryWaitMax bound the backoff
	// (defaults 100ms and 2s).
	RetryMax                   int
	RetryWaitMin, RetryWaitMax time.Duration
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	Logger  *slog.Logger
}

// NewReloader returns a Reloader for the admin listener at cfg.Addr.
func NewReloader(cfg ReloaderConfig) *Reloader {
	c := retryablehttp.NewClient()
	c.RetryMax = 4
	switch {
	case cfg.RetryMax > 0:
		c.RetryMax = cfg.RetryMax
	case cfg.RetryMax < 0:
		c.RetryMax = 0
	}
	c.RetryWaitMin = 100 * time.Millisecond
	if cfg.RetryWaitMin > 0 {
		c.RetryWaitMin = cfg.RetryWaitMin
	}
	c.RetryWaitMax = 2 * time.Second
	if cfg.RetryWaitMax > 0 {
		c.RetryWaitMax = cfg.RetryWaitMax
	}
	c.HTTPClient.Timeout = 10 * time.Second
	if cfg.Timeout > 0 {
		c.HTTPClient.Timeout = cfg.Timeout
	}
	// Loopback only: never use a proxy from the environment. No idle
	// keep-alive connection either: it is a live varnishd session and
	// would hold up a drain.
	if tr, ok := c.HTTPClient.Transport.(*http.Transport); ok {
		tr.Proxy = nil
		tr.DisableKeepAlives = true
	}
	c.Logger = nil
	if cfg.Logger != nil {
		c.Logger = retryLogger{cfg.Logger}
	}
	c.CheckRetry = checkRetry
	// Keep the last answer instead of a generic "giving up" error so the
	// caller can report ghost's message.
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return &Reloader{url: "http://" + cfg.Addr + ReloadPath, client: c}
}

// checkRetry retries transport errors and 5xx answers, but never an answer
// in which ghost reports that it refused the file, and never a 4xx.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return true, nil
	}
	if resp.StatusCode >= 500 && resp.Header.Get("Content-Type") != "application/json" {
		return true, nil
	}
	return false, nil
}

// Reload asks ghost to reload. It returns ghost's answer on success,
// a *RejectedError when ghost refused, and another error when ghost could
// not be reached within the retries.
func (r *Reloader) Reload(ctx context.Context) (*ReloadAnswer, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, r.url, nil)
	if err != nil {
		return nil, fmt.Errorf("reload ghost: %w", err)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reload ghost at %s: %w", r.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reload ghost at %s: read answer: %w", r.url, err)
	}
	var ans ReloadAnswer
	jerr := json.Unmarshal(body, &ans)
	if resp.StatusCode == http.StatusOK && jerr == nil && ans.Status == "ok" {
		return &ans, nil
	}
	if resp.StatusCode >= 500 && (jerr != nil || ans.Status != "error") {
		return nil, fmt.Errorf("reload ghost at %s: HTTP %d after retries: %s", r.url, resp.StatusCode, snippet(body))
	}
	msg := ans.Error
	if jerr != nil || msg == "" {
		msg = snippet(body)
	}
	return nil, &RejectedError{StatusCode: resp.StatusCode, Message: msg}
}

// IsRejected reports whether err is (or wraps) a *RejectedError.
func IsRejected(err error) bool {
	var r *RejectedError
	return errors.As(err, &r)
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	return s
}

type retryLogger struct{ l *slog.Logger }

func (r retryLogger) Error(msg string, kv ...any) { r.l.Error(msg, kv...) }
func (r retryLogger) Info(msg string, kv ...any)  { r.l.Debug(msg, kv...) }
func (r retryLogger) Debug(msg string, kv ...any) { r.l.Debug(msg, kv...) }
func (r retryLogger) Warn(msg string, kv ...any)  { r.l.Warn(msg, kv...) }
