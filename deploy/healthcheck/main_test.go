package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestDeployHealthcheck: 200 passes; 503, a refused connection and a
// server slower than the timeout fail.
func TestDeployHealthcheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
		case "/slow":
			time.Sleep(time.Second)
		default:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if err := check(srv.URL+"/ok", time.Second); err != nil {
		t.Errorf("200: %v", err)
	}
	if err := check(srv.URL+"/healthz", time.Second); err == nil {
		t.Error("503 passed")
	}
	if err := check(srv.URL+"/slow", 100*time.Millisecond); err == nil {
		t.Error("a slow answer passed")
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if err := check(closed.URL, time.Second); err == nil {
		t.Error("a refused connection passed")
	}
}
