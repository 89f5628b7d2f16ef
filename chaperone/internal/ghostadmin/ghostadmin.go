// Package ghostadmin is the chaperone's one client of the ghost VMOD's
// loopback admin socket (varnishd -a ghost-admin=127.0.0.1:PORT): a
// Reloader posts /.varnish-ghost/reload, which makes ghost reload ghost.json
// without a VCL reload (retrying what a retry can fix); Drain posts
// /.varnish-ghost/drain, which makes every later response close its client
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
