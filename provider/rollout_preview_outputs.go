package provider

// previewOutputs is the state a preview of Create or Update returns. pulumi-go-provider v1.5.0 (infer's
// derivedResourceController Create/Update, then fieldGenerator.MarkMap) marks every output of a preview as
// unknown unless it mirrors an input of the same name and value, or no input changed from the old state (an
// Update). The rollout's own outputs (statefulSetUid, updateRevision, membersRolled, leaderTransfers,
// unplannedElections, finishedAt, complete) mirror no input, so they come out unknown, as long as they are
// present: a nil slice or pointer is left out of the encoded map, and a missing output reads as undefined in a
// program, not as unknown. So membersRolled is set to an empty list and unplannedElections (absent when a run
// could not measure it) to a count here, which infer then turns into unknowns.
func previewOutputs(st RolloutState) RolloutState {
	st.MembersRolled = []string{}
	st.UnplannedElections = new(int)
	return st
}
