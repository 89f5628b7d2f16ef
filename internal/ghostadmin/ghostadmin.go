// Package ghostadmin is a client of the ghost VMOD's loopback admin socket
// (varnishd -a ghost-admin=127.0.0.1:PORT): POST /.varnish-ghost/reload
// makes ghost reload ghost.json without a VCL reload, POST
// /.varnish-ghost/drain makes every later response close its client
// connection.
package ghostadmin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ReloadResult is ghost's answer to /.varnish-ghost/reload.
type ReloadResult struct {
	Status     string  `json:"status"`
	Generation int64   `json:"generation"`
	Vhosts     int     `json:"vhosts"`
	Routes     int     `json:"routes"`
	Endpoints  int     `json:"endpoints"`
	DurationMS float64 `json:"duration_ms"`
}

// Reload asks ghost at addr (host:port of the ghost-admin socket) to reload
// ghost.json. An answer other than 200 {"status":"ok",...} is an error
// carrying ghost's message; the old routing state then keeps serving.
//
// The connection is closed after the answer: an idle keep-alive connection
// to the admin socket is a live varnishd session and would hold up a drain.
func Reload(ctx context.Context, addr string) (ReloadResult, error) {
	var res ReloadResult
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/.varnish-ghost/reload", nil)
	if err != nil {
		return res, fmt.Errorf("ghost reload request: %w", err)
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return res, fmt.Errorf("ghost reload: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != http.StatusOK || res.Status != "ok" {
		return res, fmt.Errorf("ghost reload answered %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return res, nil
}

// Drain tells ghost at addr that varnishd drains: from then on every
// response says "Connection: close", so each client connection closes after
// its current response. It cannot be undone; it holds for every VCL until
// the cache child restarts. The connection is closed after the answer.
func Drain(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/.varnish-ghost/drain", nil)
	if err != nil {
		return fmt.Errorf("ghost drain request: %w", err)
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("ghost drain: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var res struct {
		Status   string `json:"status"`
		Draining bool   `json:"draining"`
	}
	if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != http.StatusOK || res.Status != "ok" || !res.Draining {
		return fmt.Errorf("ghost drain answered %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}
