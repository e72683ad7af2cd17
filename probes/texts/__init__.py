"""The texts a run scores: synth ids, real text (`--haystack`), or synth text through a model's
own tokenizer (`bridged`)."""
