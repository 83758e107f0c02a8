package main

import (
	"fmt"
	"path/filepath"
)

// profiledScenario is the scenario whose engine process is profiled: ten clusters at once is where a fleet's
// cost shows.
const profiledScenario = "ten-clusters"

// profilePrefix names the profiles of one engine rollout of the profiled scenario ("" for the others). Profiling
// costs CPU and memory of its own, so the report's cost table leaves that rollout out (Rollout.Profiled).
func profilePrefix(outDir string, sc Scenario, st Strategy, run int) string {
	if sc.Name != profiledScenario || st.Default || run != 0 {
		return "" // one profiled rollout per strategy: profiling costs CPU of its own
	}
	return filepath.Join(outDir, "pprof", fmt.Sprintf("%s-%s-run%d", sc.Name, st.Name, run))
}
