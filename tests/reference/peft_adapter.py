"""The PEFT side of the LoRA reference checks (check_lora_against_peft.py, check_t5_against_transformers.py): the
adapter dir a check starts from, and an adapter's tensors. peft is imported when called, so that a check that does
not use it runs without it."""
import torch


def make_adapter_dir(path, base, r, alpha, targets, task_type, seed, rslora=False):
    """PEFT's get_peft_model(base, LoraConfig(r, alpha, targets, lora_dropout=0, task_type)) saved to path, with
    lora_B drawn N(0, 0.02^2) from seed + 1 instead of PEFT's zeros, so that the adapters change the loss from
    step 0. lora_A is PEFT's own kaiming-uniform draw from the global generator, seeded with seed."""
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(seed)
    alpha = int(alpha) if float(alpha).is_integer() else alpha
    config = LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, use_rslora=rslora,
                        task_type=task_type)
    model = get_peft_model(base, config)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    model.save_pretrained(path)


def adapter_tensors(model):
    """The adapter's tensors by PEFT's saved names, detached copies."""
    from peft import get_peft_model_state_dict
    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}


def saved_config_ok(saved, want, targets):
    """Whether PEFT's view of a saved adapter_config.json (a PeftConfig) has each key=value of want (enums compared
    by value) and target_modules equal to targets as a set; prints each difference."""
    ok = True
    for key, value in want.items():
        got, value = getattr(saved, key, None), getattr(value, "value", value)
        got = got.value if hasattr(got, "value") else got
        if got != value:
            print(f"  saved adapter_config.json: {key}={got!r}, expected {value!r}")
            ok = False
    got_targets = saved.target_modules
    got_targets = set(got_targets.split(",")) if isinstance(got_targets, str) else set(got_targets or [])
    if got_targets != set(targets):
        print(f"  saved adapter_config.json: target_modules={sorted(got_targets)}, expected {sorted(targets)}")
        ok = False
    return ok
