package agent

// RolloutGets counts the client's message gets from ROLLOUTS (tests).
func (c *Client) RolloutGets() int64 { return c.bus.RolloutGets() }
