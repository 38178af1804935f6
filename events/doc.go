// Package events is Fairway's wire contract over NATS: the subjects, the
// JetStream streams, the JSON bodies, and a Go client that speaks them.
// It is the only package that knows subject names and stream names.
//
// It has two parts, in separate files:
//
//   - The wire contract, what any client in any language must match:
//     subjects and verbs (subjects.go), streams (streams.go), the JSON
//     bodies of requests, replies, events and reports (wire.go, the
//     shares' and rates' bodies included), decoding of batches
//     (batch.go), dead letters (dead.go), grants (grant.go) and the trace
//     headers (trace.go). The coordinators and the executor use these;
//     the schemas in schemas/ describe the same bodies.
//   - The Go client built on it: Client, NewClient and their methods
//     (client.go, shares.go), and subscriptions to events (subscribe.go).
//     Go programs that submit and follow jobs use this part.
//
// They stay one package so that programs written against events.Client
// and the wire types keep their imports; the client has no wire types of
// its own.
//
// Every subject lives under a prefix (default "fairway"). The group is the
// first token that varies, so NATS permissions can confine a tenant to its
// own group: fairway.submit.acme.>, fairway.api.acme.>, fairway.events.acme.>.
//
//	<p>.submit.<group>.<task>             JetStream (stream <P>_SUBMIT): asynchronous submit, body Submission
//	<p>.api.<group>.<verb>                request/reply: what a tenant may do to its own jobs
//	<p>.admin.<verb>                      request/reply: operator API over all groups
//	<p>.events.<group>.<task>.<state>     JetStream (stream <P>_EVENTS): lifecycle events, body Event
//	<p>.notify.work                       core: "new work may be eligible" (coordinators to executors)
//	<p>.exec.<app-id>.dispatch            request/reply: an executor asks for up to N jobs
//	<p>.exec.<app-id>.register            request/reply: an executor announces itself
//	<p>.exec.<app-id>.deregister          request/reply: an executor that shuts down says so
//	<p>.exec.<app-id>.heartbeat           core: an executor's heartbeat, with the jobs it holds
//	<p>.exec.<app-id>.pong.<nonce>        core: an executor's answer to a ping (the ping's reply subject)
//	<p>.results.<app-id>                  JetStream (stream <P>_RESULTS): reports from executors, body Report
//	<p>.executor.<app-id>.<verb>          core: commands to one executor (cancel, ping)
//
// Everything an executor sends carries its app-id in the subject, and in
// operator mode its credential can publish under its own app-id only (see
// internal/natsauth): the coordinators take the executor's identity from
// the subject, never from the body.
package events
