package rollout

// CheckEventIDs validates the IDs an event_msg record carries that become
// NATS subject tokens or file names (inter_agent_sent/received msg ids and
// threads, thread_spawned's child, rollout_sealed's successor, reconciled's
// msg id). It is the one statement of that rule: the writer refuses such a
// record, the mirror quarantines it, and offline readers flag it instead of
// listing a delivery or an edge to "*". A record that is not an event, or an
// event without IDs, passes. Errors wrap ErrInvalidID, or are the decode
// error of a malformed event.
func CheckEventIDs(r *Record) error {
	if r.Type != TypeEventMsg {
		return nil
	}
	var ids [][2]string // field, value
	must := func(field, v string) { ids = append(ids, [2]string{field, v}) }
	opt := func(field, v string) {
		if v != "" {
			must(field, v)
		}
	}
	switch r.EventKind() {
	case EventInterAgentSent:
		e, err := Decode[InterAgentSent](r)
		if err != nil {
			return err
		}
		must("inter_agent_sent.msg_id", e.MsgID)
		must("inter_agent_sent.to_thread", e.ToThread)
		opt("inter_agent_sent.in_reply_to", e.InReplyTo)
	case EventInterAgentReceived:
		e, err := Decode[InterAgentReceived](r)
		if err != nil {
			return err
		}
		must("inter_agent_received.msg_id", e.MsgID)
		must("inter_agent_received.from_thread", e.FromThread)
		opt("inter_agent_received.in_reply_to", e.InReplyTo)
	case EventThreadSpawned:
		e, err := Decode[ThreadSpawned](r)
		if err != nil {
			return err
		}
		must("thread_spawned.child_thread_id", e.ChildThreadID)
	case EventRolloutSealed:
		e, err := Decode[RolloutSealed](r)
		if err != nil {
			return err
		}
		must("rollout_sealed.successor_rollout_id", e.SuccessorRolloutID)
	case EventReconciled:
		e, err := Decode[Reconciled](r)
		if err != nil {
			return err
		}
		opt("reconciled.msg_id", e.MsgID)
	}
	for _, id := range ids {
		if err := ValidateID(id[0], id[1]); err != nil {
			return err
		}
	}
	return nil
}
