"""(input embedding, output projection) tensor names of each checkpoint layout the pipeline reads.

Free of torch: the workflow's memory requests read these names from safetensors headers while the DAG
is planned (tying.plan.memory)."""
LAYOUTS = (
    ("model.embed_tokens.weight", "lm_head.weight"),  # OLMo, Llama, Qwen
    ("gpt_neox.embed_in.weight", "embed_out.weight"),  # GPT-NeoX, Pythia
    ("transformer.wte.weight", "lm_head.weight"),  # GPT-Neo, GPT-2
)
