# Every shader variant: "name|source.comp|DEFINE=1,OTHER=2". The Vulkan backend asks for variants by name.
set(STRATA_SHADER_VARIANTS
  "add|add.comp"
)
