package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/echo"
)

func TestServe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, l, "web-7d9f-abcde") }()

	req, _ := http.NewRequest(http.MethodPost, "http://"+l.Addr().String()+"/a/b?c=d", nil)
	req.Host = "www.example.com"
	req.Header.Set("X-Test", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get("X-Backend"); got != "web-7d9f-abcde" {
		t.Errorf("X-Backend %q", got)
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || sc.Text() != "web-7d9f-abcde" {
		t.Fatalf("first line %q, want the name", sc.Text())
	}
	var e echo.Answer
	if !sc.Scan() {
		t.Fatal("no JSON line")
	}
	if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	if e.Method != "POST" || e.Host != "www.example.com" || e.Path != "/a/b?c=d" || e.Headers["X-Test"][0] != "1" {
		t.Errorf("echo %+v", e)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after cancel, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after cancel")
	}
}
