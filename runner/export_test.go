package runner

// SetBeforeLock makes f run in every reopen (resume, dlq retry) between
// reading the job's checkpoint and locking the job, until restore is called.
// Tests that use it must not run in parallel with others.
func SetBeforeLock(f func()) (restore func()) {
	beforeLock = f
	return func() { beforeLock = nil }
}

// SetKeptOutcomes lowers KeptOutcomes until restore is called. Tests that
// use it must not run in parallel with others.
func SetKeptOutcomes(n int) (restore func()) {
	keptOutcomes = n
	return func() { keptOutcomes = KeptOutcomes }
}
