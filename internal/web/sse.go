package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/fairwayhq/fairway/events"
)

// liveEvents streams lifecycle events as Server-Sent Events: each event a
// message of type "job" whose data is the event's JSON, from now on (of
// the confined group, or ?group=). A comment every 15 s keeps proxies from
// closing an idle stream. Each role has at most Config.StreamsMax streams
// open, each session (or bearer token) Config.StreamsPerClient: the
// read-only role can never take the admins' streams.
func (s *Server) liveEvents(w http.ResponseWriter, r *http.Request, c caller) error {
	group, err := s.group(r.URL.Query().Get("group"))
	if err != nil {
		return err
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("the response cannot stream")
	}
	release, err := s.streams.take(c)
	if err != nil {
		return err
	}
	defer release()
	ch := make(chan events.Event, 256)
	dropped := 0
	sub, err := s.cfg.Client.Subscribe(r.Context(), events.Filter{Group: group}, func(ev events.Event) {
		select {
		case ch <- ev:
		default:
			dropped++ // a slow browser misses events, never holds the consumer
		}
	})
	if err != nil {
		return err
	}
	defer sub.Stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, ": live events\n\n"); err != nil {
		return nil // the browser is gone
	}
	flusher.Flush()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil // the browser is gone: stop, before the request's context says so
			}
		case ev := <-ch:
			data, _ := json.Marshal(ev)
			if _, err := fmt.Fprintf(w, "event: job\ndata: %s\n\n", data); err != nil {
				return nil // as above
			}
		}
		flusher.Flush()
	}
}
