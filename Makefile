# vase: two commands do all set-up on a fresh Debian/Ubuntu machine.
#   make demo   # synthesise, render, train and evaluate the tiny model on CPU; writes a report
#   make test   # the default test suite (heavier tests: make test-slow)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.vase-installed
SYSDEPS := libegl1 libegl-mesa0 libgl1-mesa-dri
SLURMDEPS := slurm-wlm munge
BROWSERDEPS := chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: dist wheel-check setup sysdeps slurm-deps browser-deps docs docs-version docs-serve docs-check dashboards-check demo ablation-quick ablation-demo beyond-demo grpo-sanity readme-tables stack-check cluster-check test test-slow lint format clean clean-runs

setup: sysdeps $(STAMP)

# Headless OpenGL (EGL on Mesa llvmpipe) for the renderer; installed only when missing.
sysdeps:
	@if ! dpkg -s $(SYSDEPS) >/dev/null 2>&1; then \
		echo "installing $(SYSDEPS) (headless rendering)"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSDEPS); \
	fi

# The venv takes about 7 GB (torch's build alone 5.5 GB) and pip unpacks in the temporary folder: a full disk is said
# before pip starts (a new venv), not as an OSError minutes into it
NEED_GB ?= 9
$(STAMP): setup.cfg pyproject.toml Makefile
	@[ -x $(BIN)/python ] || for d in . "$${TMPDIR:-/tmp}"; do \
		free=$$(df -Pk "$$d" | awk 'NR==2 {print int($$4 / 1048576)}'); \
		if [ "$$free" -lt $(NEED_GB) ]; then \
			echo "setup needs about $(NEED_GB) GB free for the venv and pip's unpacking; $$(cd "$$d" && pwd) has $$free GB" \
				"(df -h $$d). Free space (old clones' .venv, pip's cache: pip cache purge) or set TMPDIR, then rerun." >&2; \
			exit 1; \
		fi; \
	done
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	# pip's own cache: a second clone on this machine installs faster. compat: the checkout itself on sys.path, so
	# Hydra finds vase's sweeper and launchers in hydra_plugins/ from any working folder (a namespace package that
	# setuptools' default editable finder hides from Hydra's plugin scan)
	$(BIN)/python -m pip install -q -e ".[dev]" --config-settings editable_mode=compat
	@touch $(STAMP)

demo: setup
	$(BIN)/python train.py experiment=demo

# The reward-weight sweep's quick form, which decides target (i): one draw, its SFT, GRPO at shape weight 0 and 0.6
# (its time: docs/getting-started.md, "How long each command takes"); DRAW=5 runs it on a second draw of the data
ablation-quick: setup
	$(BIN)/python train.py -m experiment=ablation_quick data.synthetic.seed=$(or $(DRAW),0)

# The reward-weight ablation on CPU: two data draws, each with its SFT, GRPO at shape weight 0 / 0.15 / 0.6; decided
# on held-out captions scored by each run's own reward terms (multiple choice as transfer to QA);
# writes logs/ablation_demo/multiruns/<time>/{summary,ablation}.md and ablation.png
ablation-demo: setup
	$(BIN)/python train.py -m experiment=ablation_demo

# Beyond the paper, measured: each idea against the same pipeline without it on 240 held-out vases, two data draws x
# two seeds, paired intervals (logs/beyond_<idea>/multiruns/<time>/compare.md): retrieval (SFT), the zoom tool (SFT),
# GRPO with the inverse-rendering term (against its own SFT start), GRPO with the learned term
beyond-demo: setup
	$(BIN)/python train.py -m experiment=beyond_retrieval
	$(BIN)/python train.py -m experiment=beyond_zoom
	$(BIN)/python train.py -m experiment=beyond_invrender
	$(BIN)/python train.py -m experiment=beyond_learned

# The GRPO learning check: from the demo's SFT, GRPO on one binary term (the caption names the vase's true shape) must
# raise the mean training reward by 0.3 on seeds 1 and 2; prints PASS/FAIL, exits 1 on FAIL (logs/grpo_sanity/<time>/)
grpo-sanity: setup
	$(BIN)/python -m vase.sanity

# The README's and docs/ pages' tables that come from runs (the learning check, the ablation demo, beyond) are rebuilt from their results files
readme-tables: setup
	$(BIN)/python -m vase.readme_tables

# vase in the real ms-swift and TRL (CPU, tiny model, minutes): export, swift sft, the paper's swift rlhf GRPO with vase's
# plugin, plugin-vs-vase reward parity, TRL's GRPOTrainer with vase's reward functions, ms-swift data read back.
# Builds ms-swift's own venv under ~/.cache/vase/tools/ (VASE_TOOLS_DIR) from the package index when missing; PASS/FAIL per part
stack-check: setup
	$(BIN)/python -m vase.checks.stack_check

# Debian's SLURM and munge for make cluster-check; installed only when missing
slurm-deps:
	@if ! dpkg -s $(SLURMDEPS) >/dev/null 2>&1; then \
		echo "installing $(SLURMDEPS) (a SLURM cluster on the loopback for make cluster-check)"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SLURMDEPS); \
	fi

# vase on a real one-node SLURM cluster started on the loopback (stopped at the end): a sweep on a CPU partition,
# preemption (USR2 -> checkpoint, requeue, resume), a time limit, two ranks per node (DDP on gloo), GRPO on two
# ranks; PASS/FAIL per part under logs/cluster_check/<time>/
cluster-check: setup slurm-deps
	$(BIN)/python -m vase.checks.cluster_check

# The documentation site (docs/, mkdocs.yml) into site/, --strict: a broken link, a missing page or an API
# reference that no longer resolves fails; the configuration reference must equal what the code generates
docs: setup
	$(BIN)/python -m vase.docsgen.config_reference --check
	$(BIN)/python -m vase.docsgen.troubleshooting --check
	$(BIN)/python -m vase.docsgen.numbers
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@echo "site built: site/index.html"

# This version's pages on the gh-pages branch under X.Y/ (mike), "latest" pointing at them and the selector listing
# every version published: a user on X.Y reads X.Y's pages. Publish with git push origin gh-pages (docs/development.md).
DOCS_VERSION ?= $(shell sed -n 's/^__version__ = "\([0-9]*\.[0-9]*\).*"/\1/p' vase/__init__.py)
docs-version: setup
	PATH="$(abspath $(BIN)):$$PATH" NO_MKDOCS_2_WARNING=1 $(BIN)/mike deploy --update-aliases $(DOCS_VERSION) latest  # mike runs mkdocs
	$(BIN)/mike set-default latest
	@echo "docs of $(DOCS_VERSION) on the gh-pages branch: git push origin gh-pages publishes them"

# Debian's Chromium for the headless screenshots of docs-check and dashboards-check; installed only when missing
browser-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
		echo "installing $(BROWSERDEPS) (headless screenshots)"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(BROWSERDEPS); \
	fi

# The site as a reader sees it: built, opened in headless Chromium (Debian's, installed when missing), the home page,
# the ablation page and the configuration reference screenshotted; a page without its rendered tables or plots fails
# (logs/docs_check/<time>/)
docs-check: setup browser-deps
	$(BIN)/python -m vase.checks.docs_check

# The self-hosted dashboards for real: an MLflow server (its own venv under ~/.cache/vase/tools/) and TensorBoard on
# 127.0.0.1, a ten-job sweep (two weights x five seeds) logged to both, read back through their HTTP APIs, screenshotted in headless Chromium
dashboards-check: setup browser-deps
	$(BIN)/python -m vase.checks.dashboards_check

# The wheel as a user installs it: pip install <wheel> into a new environment with every dependency from the package
# index (nothing borrowed from .venv), vase --version, then the README's demo from an empty folder (logs/wheel_check/)
wheel-check: setup
	$(BIN)/python -m vase.checks.wheel_check

docs-serve: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

# both suites on TEST_WORKERS processes (pytest-xdist; each file's tests on one, which shares its fixtures): a test
# that waits (a server, a SLURM queue, a browser) leaves its core to the other's. Their torch jobs run side by side,
# so OpenMP's idle threads sleep instead of spinning on the other job's core (OMP_WAIT_POLICY=PASSIVE; no arithmetic
# changes): two of the dashboards check's sweeps side by side took 149 s so, and over 15 minutes spinning (GRPO at
# 12.5 s/step against 0.37 alone; docs/development.md)
TEST_WORKERS ?= 2
SUITE_ENV := OMP_WAIT_POLICY=PASSIVE
test: setup
	$(SUITE_ENV) $(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) --dist loadfile --durations=15

test-slow: setup
	$(SUITE_ENV) $(BIN)/python -m pytest -m slow -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=40

# style (ruff) and the layer contracts of ARCHITECTURE.md (import-linter, .importlinter)
lint: setup
	$(BIN)/ruff check vase hydra_plugins tests benchmarks train.py evaluate.py
	$(BIN)/lint-imports --no-cache

format: setup
	$(BIN)/ruff format vase hydra_plugins tests benchmarks train.py evaluate.py

# Removes only what vase generated and can regenerate: caches (tiny models, synthetic vases, renders, embeddings).
# Never data/ (where users keep datasets such as data/VaseVQA-3D) and never trained runs (see clean-runs).
# The sdist and the wheel of a release into dist/ (docs/development.md, "Releases"); tests/test_wheel.py installs a
# wheel into a fresh environment outside the checkout and runs it from an empty folder (make test runs it).
dist: setup
	rm -rf dist build
	$(BIN)/python -m build --no-isolation --outdir dist .
	rm -rf build
	@ls dist

clean:
	rm -rf .cache .pytest_cache .ruff_cache

# Deletes every trained run, adapter and checkpoint under logs/, multirun/, outputs/ and the filter and
# reconstruction outputs (filtered/, reconstructed/): only when asked by name.
clean-runs:
	rm -rf logs multirun outputs filtered reconstructed
