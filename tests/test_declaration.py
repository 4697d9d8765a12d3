"""Model tests of the declaration lookup (jaxlint/declaration.py): which folder's packaging files
declare the JAX version for a file, and the requirements on jax and jaxlib read from each kind of
file (never run), with extras, markers, includes and the files that cannot be read."""

from __future__ import annotations

import os
import textwrap

from jaxlint.declaration import Finder


def _write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))


def _read(folder):
    decl, _ = Finder().declaration(str(folder))
    return decl


def _reqs(decl) -> list:
    return [(r.name, r.spec, r.style) for r in decl.requirements]


def test_the_nearest_folder_with_a_packaging_file_wins_and_the_search_stops_there(tmp_path):
    _write(tmp_path / "pyproject.toml", '[project]\ndependencies = ["numpy"]\n')
    _write(tmp_path / "pkg" / "requirements.txt", "jax>=0.6\n")
    (tmp_path / "pkg" / "sub").mkdir()
    decl = _read(tmp_path / "pkg" / "sub")
    assert decl.root == str(tmp_path / "pkg") and decl.files == ["requirements.txt"] and len(_reqs(decl)) == 1
    assert _read(tmp_path).root == str(tmp_path)


def test_a_folders_own_extras_without_jax_leave_the_jax_requirement_above_them(tmp_path):
    # fresh AA's first look: ``model_validation/requirements.txt`` (hydra, wandb) beside the
    # project's ``requirements.txt`` pinning jax==0.4.13 one folder up
    _write(tmp_path / "requirements.txt", "jax==0.4.13\njaxlib==0.4.13\n")
    _write(tmp_path / "tools" / "requirements.txt", "hydra-core==1.3.2\nwandb\n")
    decl = _read(tmp_path / "tools")
    assert decl.root == str(tmp_path) and [r.spec for r in decl.requirements if r.name == "jax"] == ["==0.4.13"]
    # with no JAX requirement above either, the nearest declaration is the answer
    (tmp_path / "requirements.txt").write_text("numpy\n")
    assert _read(tmp_path / "tools").root == str(tmp_path / "tools")
    # nor is a repository's boundary crossed
    (tmp_path / "requirements.txt").write_text("jax==0.4.13\n")
    (tmp_path / "tools" / ".git").mkdir()
    assert _read(tmp_path / "tools").root == str(tmp_path / "tools")


def test_a_git_folder_ends_the_search(tmp_path):
    _write(tmp_path / "pyproject.toml", '[project]\ndependencies = ["jax==0.4.8"]\n')
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src").mkdir()
    assert _read(tmp_path / "repo" / "src") is None
    assert Finder().declaration(str(tmp_path / "repo" / "src"))[1][2] is None  # recorded for the cache: none


def test_pyproject_project_extras_groups_and_poetry(tmp_path):
    _write(tmp_path / "pyproject.toml", """
        [project]
        dependencies = ["numpy", "jax[cuda12]==0.4.23; python_version < '3.11'", "JAX >= 0.4.30 ; python_version >= '3.11'"]
        [project.optional-dependencies]
        tpu = ["jaxlib (>=0.4.20)"]
        [dependency-groups]
        dev = ["jax @ git+https://github.com/jax-ml/jax", {include-group = "x"}]
        [tool.poetry.dependencies]
        python = ">=3.8"
        jax = "^0.4.8"
        [tool.poetry.group.gpu.dependencies]
        jax = {version = "~0.4.8", extras = ["cuda12"]}
        [tool.poetry.dev-dependencies]
        jax = [{version = "0.4.8", python = "<3.9"}, {git = "https://github.com/jax-ml/jax"}]
    """)
    decl = _read(tmp_path)
    assert decl.problems == []
    assert _reqs(decl) == [("jax", "==0.4.23", "pep440"), ("jax", ">= 0.4.30", "pep440"),
                           ("jaxlib", "(>=0.4.20)", "pep440"), ("jax", "", "pep440"), ("python", ">=3.8", "poetry"),
                           ("jax", "^0.4.8", "poetry"),
                           ("jax", "0.4.8", "poetry"), ("jax", "", "poetry"), ("jax", "~0.4.8", "poetry")]
    assert {r.file for r in decl.requirements} == {f"{tmp_path.name}/pyproject.toml"}


def test_setup_cfg_and_its_file_directive(tmp_path):
    _write(tmp_path / "setup.cfg", """
        [options]
        install_requires =
            numpy
            jax>=0.4.8,<0.5
        [options.extras_require]
        gpu = jaxlib==0.4.7
        more = file: extra.txt
    """)
    _write(tmp_path / "extra.txt", "jax==0.4.9\n")
    assert _reqs(_read(tmp_path)) == [("jax", ">=0.4.8,<0.5", "pep440"), ("jaxlib", "==0.4.7", "pep440"),
                                      ("jax", "==0.4.9", "pep440")]


def test_setup_py_literals_and_names_bound_to_literals_never_run(tmp_path):
    _write(tmp_path / "setup.py", """
        import sys
        from setuptools import setup
        REQUIRED = ["jax==0.4.8", "numpy"]
        sys.exit("this file is never run")
        setup(name="x", install_requires=REQUIRED, extras_require={"gpu": ["jaxlib==0.4.7"]})
    """)
    assert _reqs(_read(tmp_path)) == [("jax", "==0.4.8", "pep440"), ("jaxlib", "==0.4.7", "pep440")]


def test_setup_py_that_computes_its_requirements_is_a_problem_unless_it_reads_our_files(tmp_path):
    _write(tmp_path / "a" / "setup.py", "import setuptools\nsetuptools.setup(install_requires=get_deps())\n")
    decl = _read(tmp_path / "a")
    assert decl.problems == [("a/setup.py", "install_requires is computed, not a literal list")]
    _write(tmp_path / "b" / "setup.py", "from setuptools import setup\nsetup(**config)\n")
    assert "computed" in _read(tmp_path / "b").problems[0][1]
    _write(tmp_path / "c" / "setup.py", "from setuptools import setup\n"
                                        "setup(install_requires=read_reqs('requirements/base.txt'))\n")
    _write(tmp_path / "c" / "requirements" / "base.txt", "jax==0.4.8\n")
    decl = _read(tmp_path / "c")
    assert decl.problems == [] and _reqs(decl) == [("jax", "==0.4.8", "pep440")]
    _write(tmp_path / "d" / "setup.py", "setup(install_requires=open('deps.txt').read().split())\n")
    assert _read(tmp_path / "d").problems  # deps.txt is not a requirements file the lookup reads
    _write(tmp_path / "e" / "setup.py", "setup(\n")
    assert _read(tmp_path / "e").problems == [("e/setup.py", "not Python that parses")]


def test_requirements_files_includes_options_and_comments(tmp_path):
    _write(tmp_path / "requirements.txt", """
        # the pins
        --find-links https://storage.googleapis.com/jax-releases/jax_releases.html
        -r requirements-base.txt
        jaxlib==0.3.2+cuda11.cudnn82  # Make sure CUDA matches
        -e .
    """)
    _write(tmp_path / "requirements-base.txt", "jax[cpu]==0.3.4 \\\n  --hash=sha256:abc\n")
    _write(tmp_path / "requirements" / "docs.txt", "jax\n")
    decl = _read(tmp_path)
    assert decl.files == ["requirements-base.txt", "requirements.txt", os.path.join("requirements", "docs.txt")]
    assert sorted(_reqs(decl)) == [("jax", "", "pep440"), ("jax", "==0.3.4", "pep440"), ("jax", "==0.3.4", "pep440"),
                                   ("jaxlib", "==0.3.2+cuda11.cudnn82", "pep440")]
    _write(tmp_path / "x" / "requirements.txt", "-r missing.txt\n")
    assert "cannot be read" in _read(tmp_path / "x").problems[0][1]


def test_environment_yml_conda_and_pip(tmp_path):
    _write(tmp_path / "environment.yml", """
        name: env
        channels:
          - conda-forge
        dependencies:
          - python=3.10
          - conda-forge::jaxlib=0.3.15=*cuda*
          - jax 0.3.16 py_0  # a version and a build
          - flax=0.5.0=pyhd8ed1ab_0
          - pip
          - pip:
            - "jax[cuda]==0.3.16"
        variables:
          - jax=9
    """)
    # ``name=version=build`` (what ``conda env export`` writes): the version, its build string dropped
    assert _reqs(_read(tmp_path)) == [("python", "=3.10", "conda"), ("jaxlib", "=0.3.15", "conda"), ("jax", "0.3.16", "conda"),
                                      ("jax", "==0.3.16", "pep440")]


def test_a_conda_export_pin_with_a_build_string_is_read(tmp_path):
    """``jax=0.3.14=pyhd8ed1ab_1`` in a ``conda env export`` file (fresh set R: conformal_training,
    whose JAX404 finding said the file constrained no JAX version) pins 0.3.14; items of another key
    after ``dependencies`` are not read."""
    from jaxlint.model.facts import jaxrange

    # the list's items at the key's own column, as ``conda env export`` writes them
    _write(tmp_path / "environment.yml", "name: env\ndependencies:\n- jax=0.3.14=pyhd8ed1ab_1\n- jaxlib=0.3.14=cpu_py39h79d7c74_0\n"
                                         "- pip:\n  - optax==0.1.2\nprefix: /opt/env\n- jax=9\n")
    reqs = _reqs(_read(tmp_path))
    assert reqs == [("jax", "=0.3.14", "conda"), ("jaxlib", "=0.3.14", "conda")]
    allowed = jaxrange.spec("=0.3.14", "conda")
    assert allowed.oldest() == (0, 3, 14)
    assert not allowed.includes_from((0, 3, 16)) and allowed.includes_from((0, 3, 14))


def test_conda_environments_named_for_a_platform_and_one_folder_down(tmp_path):
    """Set I's manyfold: `setup.py` says nothing of JAX; `docker/environment_tpu.yaml` and
    `docker/environment_cuda.yaml` pin it. Requirements files below the root (docs, examples) and
    hidden folders are not part of the declaration."""
    _write(tmp_path / "setup.py", "from setuptools import setup\nsetup(name='p', install_requires=['numpy'])\n")
    env = """
        dependencies:
          - python=3.8
          - pip:
              - --find-links https://example.org/releases.html
              - jax[tpu]==0.3.14
    """
    _write(tmp_path / "docker" / "environment_tpu.yaml", env)
    _write(tmp_path / "environment-gpu.yml", env.replace("jax[tpu]", "jax[cuda]"))
    _write(tmp_path / "docs" / "requirements.txt", "jax==0.2.0\n")
    _write(tmp_path / ".ci" / "environment.yml", env.replace("0.3.14", "0.1.0"))
    _write(tmp_path / "pkg" / "model.py", "import jax\n")
    decl = _read(tmp_path / "pkg")
    assert decl.root == str(tmp_path)
    assert sorted(decl.files) == ["docker/environment_tpu.yaml", "environment-gpu.yml", "setup.py"]
    assert _reqs(decl) == [("python", "=3.8", "conda"), ("jax", "==0.3.14", "pep440"), ("python", "=3.8", "conda"),
                           ("jax", "==0.3.14", "pep440")]


def test_unreadable_files_are_problems(tmp_path):
    _write(tmp_path / "pyproject.toml", "[project\n")
    assert "invalid TOML" in _read(tmp_path).problems[0][1]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "requirements.txt").write_bytes(b"jax==\xff\n")
    assert _read(tmp_path / "b").problems == [("b/requirements.txt", "not UTF-8 text")]


def test_each_folder_is_listed_and_each_declaration_read_once(tmp_path, monkeypatch):
    _write(tmp_path / "pyproject.toml", '[project]\ndependencies = ["jax==0.4.8"]\n')
    (tmp_path / "a" / "b").mkdir(parents=True)
    finder = Finder()
    first, dep = finder.declaration(str(tmp_path / "a" / "b"))
    assert dep[0] == "d" and dep[2] == str(tmp_path) and dep[4][0][0] == str(tmp_path / "pyproject.toml")
    monkeypatch.setattr(os, "scandir", None)  # no folder is listed again
    assert finder.declaration(str(tmp_path / "a"))[0] is first and finder.declaration(str(tmp_path))[0] is first


def test_the_declared_python_is_read_from_every_kind_of_file(tmp_path):
    """JAX's releases each support a range of Pythons, so the Python a project declares caps its JAX
    (jaxlint/model/facts/jaxrange.py); a computed value is no declaration."""
    _write(tmp_path / "a" / "pyproject.toml", '[project]\nrequires-python = "<3.10"\n')
    _write(tmp_path / "b" / "setup.py", "from setuptools import setup\nV = '==3.8.*'\nsetup(python_requires=V)\n")
    _write(tmp_path / "c" / "setup.cfg", "[options]\npython_requires = >=3.7, <3.9\n")
    _write(tmp_path / "d" / "environment.yml", "dependencies:\n  - python==3.12\n")
    _write(tmp_path / "e" / "setup.py", "from setuptools import setup\nsetup(python_requires=get())\n")
    got = {d: _reqs(_read(tmp_path / d)) for d in "abcde"}
    assert got == {"a": [("python", "<3.10", "pep440")], "b": [("python", "==3.8.*", "pep440")],
                   "c": [("python", ">=3.7, <3.9", "pep440")], "d": [("python", "==3.12", "conda")], "e": []}
