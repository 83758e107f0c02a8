// Package e2e runs the examples/ programs end to end with the real pulumi CLI on the local cluster
// (make cluster-up): create, a template change whose preview shows the plan, the rollout, a no-op, a
// cancelled rollout that the next up finishes, and a bad input refused in preview.
//
// The pulumi language hosts cannot be had on these machines, so every program runs inline through the
// Automation API: the Go example in this process, the TypeScript and Python examples in a fresh Node or
// Python process per step (tests/e2e/node/driver.js, tests/e2e/python/driver.py), which import the example's
// program and print one JSON result line. Stacks use a file backend in a temporary folder, and the provider
// plugins are found through the project settings' plugins.providers.
//
// The tests need build tag e2e: `make test-e2e` builds what they need first.
package e2e
