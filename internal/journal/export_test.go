package journal

import "context"

// WriteLive writes fairway_live_job now, as the leader does every
// LeaderConfig.LiveEvery (live.go).
func (l *Leader) WriteLive(ctx context.Context) error { return l.writeLive(ctx) }
