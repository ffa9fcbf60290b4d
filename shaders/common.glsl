// Shared by every Strata compute shader: subgroup extensions and the flattened 2D workgroup grid.
// Include it after the local_size layout: gl_WorkGroupSize is (1, 1, 1) until that is declared.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

// The host spills more than maxComputeWorkGroupCount[0] workgroups into y (vocab 128256 rows!);
// shaders number workgroups linearly and skip those past their work.
uint group_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }
uint global_index() { return group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x; }
