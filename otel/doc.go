// Package convergeotel traces a converge reconciler with OpenTelemetry:
// an Observer (Tracer) that turns the reconciler's events into one span
// per attempt, and Links, which remembers the trace a write was made in
// so that the attempts it asked for link to it.
//
// It is a module of its own (github.com/converge-go/converge/otel), so
// that a program that imports only converge's reconciler, index or
// metrics links no OpenTelemetry code.
//
// What a trace shows, for each attempt of a key:
//
//   - converge.attempt: from when the request was queued (read, or its
//     retry came due) to when the operation returned, with span events
//     "started" (on which worker) and "finished"; attributes
//     converge.key, converge.attempt, converge.op, converge.class (the
//     waiting class: change, retry, refresh, delete),
//     converge.priority, converge.target, converge.queue_wait_seconds,
//     converge.worker and converge.result; the error, if any, as the
//     span's status. It links to the writer's span (Links) and, for a
//     retry, to the attempt before it. For a key that was Blocked on a
//     dependency, the events "blocked" (converge.blocked_on) and
//     "released", and converge.blocked_seconds.
//   - converge.commit, its child: from the operation's return to the
//     status write (converge.commit: written, dropped or nothing;
//     converge.status), and for a failure when the retry is due
//     (converge.retry_at) or that it was given up on.
//   - converge.sync: one span per whole-set Sync, with converge.objects.
//
// A Tracer never blocks the reconciler: spans go to the SDK's span
// processor (use a batch processor, which drops when its queue is full).
// It asks the engine only for the events it uses (reconciler.EventFilter).
// With a head sampler (Options.Sample, e.g. OneIn), it declines the
// attempts the sampler does not take (reconciler.AttemptFilter): the
// engine builds no event for them and no span is started, so that an
// unsampled attempt costs nearly nothing. Without one, every attempt goes
// to the SDK's sampler: an attempt it drops costs the engine's events and
// the span's Start, on the worker; links are looked up and attributes
// set only on spans that record.
package convergeotel
