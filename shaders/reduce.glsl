// Workgroup-wide sum and max: subgroup arithmetic first, then one value per subgroup through shared memory.
// Every invocation of the workgroup must call these (they contain barriers) and gets the result.
shared float reduce_scratch[gl_WorkGroupSize.x];  // one slot per subgroup; WG slots cover any subgroup size

float workgroup_sum(float v) {
    v = subgroupAdd(v);
    if (subgroupElect()) reduce_scratch[gl_SubgroupID] = v;
    barrier();  // the subgroup totals are written before anyone adds them up
    float total = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; ++i) total += reduce_scratch[i];
    barrier();  // everyone has read them before the next reduction overwrites them
    return total;
}

float workgroup_max(float v) {
    v = subgroupMax(v);
    if (subgroupElect()) reduce_scratch[gl_SubgroupID] = v;
    barrier();
    float m = reduce_scratch[0];
    for (uint i = 1u; i < gl_NumSubgroups; ++i) m = max(m, reduce_scratch[i]);
    barrier();
    return m;
}
