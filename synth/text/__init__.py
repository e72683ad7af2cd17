"""Real text: a corpus reader, a byte-level BPE tokenizer, a training stream and probe texts
built from real haystack documents. numpy and the standard library; `tokenizers` is imported
only when a tokenizer is trained, loaded or used (the rest of `synth` never needs it), and
torch never.

Modules: `corpus` (files and directories of UTF-8 text → documents; bad files named),
`default_corpus` (the prose the standard library ships: `pydoc_data.topics`, split into
training and haystack documents), `tokenizer` (the BPE, trained or loaded, and how a
tokenizers-format JSON is told from a synth language), `render` (pieces of text → token ids,
each piece's tokens found by character offsets: what probe texts and the tokenizer bridge
share), `lexicon` (English entities, attributes and values), `haystack` (filler of exact
token lengths from real text), `world` (the tokenizer, haystack and lexicon a probe writes
with), `compose` (documents laid out at exact token positions), `facts` (fact documents and the
fact probes' edits), `contexts` (the texts of boundary, cross-doc and topic-shift), `facts_mix`
(facts inserted into training documents), `stream` (the training stream).
"""
