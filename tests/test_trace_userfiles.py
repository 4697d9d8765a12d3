"""Which files `jaxlint trace` counts as the user's: a library installed with `pip install --target`
onto `sys.path` is not, even outside site-packages (issue 38: optax put in /tmp/site on the TPU
machine made its own lines the user's, and the eager update was counted inside optax)."""

import os
import sys

from jaxlint.trace.userfiles import UserFiles


def _wheel_dir(tmp_path, record_lines):
    site = tmp_path / "site"
    (site / "somelib").mkdir(parents=True)
    (site / "somelib" / "__init__.py").write_text("x = 1\n")
    (site / "somelib" / "core.py").write_text("y = 2\n")
    info = site / "somelib-1.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("".join(f"{line}\n" for line in record_lines))
    return site


def test_a_file_a_wheel_installed_into_a_folder_on_sys_path_is_not_the_users(tmp_path, monkeypatch):
    site = _wheel_dir(tmp_path, ["somelib/__init__.py,sha256=abc,6", "somelib/core.py,sha256=def,6",
                                 "somelib-1.0.dist-info/RECORD,,"])
    monkeypatch.setattr(sys, "path", [str(site)] + sys.path)
    user = UserFiles()
    assert not user(str(site / "somelib" / "core.py"))
    assert not user(str(site / "somelib" / "__init__.py"))


def test_a_file_beside_them_that_no_record_lists_is_still_the_users(tmp_path, monkeypatch):
    site = _wheel_dir(tmp_path, ["somelib/__init__.py,sha256=abc,6"])
    (site / "train.py").write_text("z = 3\n")
    monkeypatch.setattr(sys, "path", [str(site)] + sys.path)
    user = UserFiles()
    assert user(str(site / "train.py"))
    assert user(str(site / "somelib" / "core.py"))  # not in the RECORD: not installed by that wheel
    assert not user(str(site / "somelib" / "__init__.py"))


def test_the_same_folder_not_on_sys_path_is_the_users(tmp_path):
    site = _wheel_dir(tmp_path, ["somelib/core.py,sha256=def,6"])
    assert str(site) not in sys.path
    assert UserFiles()(str(site / "somelib" / "core.py"))


def test_a_checkout_with_an_egg_info_on_sys_path_stays_the_users(tmp_path, monkeypatch):
    """`pip install -e .` (setuptools' develop mode) leaves `proj.egg-info` in the checkout, which is on
    sys.path: the project's own files stay the user's."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "model.py").write_text("w = 0\n")
    (tmp_path / "proj.egg-info").mkdir()
    (tmp_path / "proj.egg-info" / "SOURCES.txt").write_text("proj/model.py\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + sys.path)
    user = UserFiles([str(tmp_path)])
    assert user(str(tmp_path / "proj" / "model.py"))


def test_roots_still_decide_first(tmp_path, monkeypatch):
    site = _wheel_dir(tmp_path, ["somelib/core.py,sha256=def,6"])
    monkeypatch.setattr(sys, "path", [str(site)] + sys.path)
    assert not UserFiles([str(tmp_path)])(str(site / "somelib" / "core.py"))
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert not UserFiles([str(other)])(str(site / "somelib" / "__init__.py"))
    assert os.path.isdir(site)
