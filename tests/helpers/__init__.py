"""What tests share but do not test: tiny models, broken twins, the reference sampler, the ZeroGPU
stand-in and the app client (tests/README.md, "Helpers")."""
