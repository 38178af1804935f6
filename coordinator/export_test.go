package coordinator

import "context"

// FirePeriodic fires the periodic tasks due at the coordinator's clock now,
// as its periodic loop does when their time comes.
func (c *Coordinator) FirePeriodic(ctx context.Context) { c.firePeriodic(ctx) }
