package runner

// SetBeforeLock makes f run in every reopen (resume, dlq retry) between
// reading the job's checkpoint and locking the job, until restore is called.
// Tests that use it must not run in parallel with others.
func SetBeforeLock(f func()) (restore func()) {
	beforeLock = f
	return func() { beforeLock = nil }
}

// The engine's own tests drive the operations below the Engine's specs,
// with every setting in one value (options): each Engine method only
// copies its spec into these (engine.go; engine_test.go checks that it
// does). Tests outside this package use the Engine.
type (
	Options       = options
	ResumeOptions = resumeOptions
	RetryOptions  = retryOptions
	PlanOptions   = planOptions
	ShardOptions  = shardOptions
	GatherOptions = gatherOptions
)

var (
	Run      = runJob
	Resume   = resumeJob
	RetryDLQ = retryDLQ
	PlanJob  = planJob
	RunShard = runShard
	Gather   = gatherJob
)
