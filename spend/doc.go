// Package spend holds what keeps a fleet of agents from spending past the
// point of use: the failure-storm breaker (this file set), which stops
// launching items once recent failures share one cause. It imports no
// project package: outcomes and signatures in, decisions out.
package spend
