package events

import (
	"bytes"
	"fmt"

	"github.com/fairwayhq/fairway/internal/wirejson"
)

// DecodeEvents decodes the body of a message of the events stream. The
// coordinators publish events in batches by default: a JSON array of
// events that share the message's subject (group, task and state), in the
// order of their changes. With coordinator.event-per-message they publish
// one event per message, a JSON object. Both are accepted here.
func DecodeEvents(data []byte) ([]Event, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var evs []Event
		if err := wirejson.Unmarshal(trimmed, &evs); err != nil {
			return nil, fmt.Errorf("decoding a batch of events: %w", err)
		}
		return evs, nil
	}
	var ev Event
	if err := wirejson.Unmarshal(trimmed, &ev); err != nil {
		return nil, fmt.Errorf("decoding an event: %w", err)
	}
	return []Event{ev}, nil
}
