"""Everything is declared in setup.cfg; this file only adds lightmod-mxnet-alias.pth.

The .pth file goes to the root of site-packages (with the packages), where Python reads it at
start-up; its one line activates the ``mxnet`` alias only when LIGHTMOD_MXNET_ALIAS=1 (see
lightmod_mxnet_alias.py).
"""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH_NAME = "lightmod-mxnet-alias.pth"
PTH_LINE = ("import os; os.environ.get('LIGHTMOD_MXNET_ALIAS') == '1' and "
            "__import__('lightmod_mxnet_alias').install()\n")


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        folders = [self.build_lib]
        if getattr(self, "editable_mode", False):
            # an editable wheel is assembled from the install folder, not from build_lib
            folders.append(self.distribution.get_command_obj("install").install_lib)
        for folder in folders:
            if folder:
                os.makedirs(folder, exist_ok=True)
                with open(os.path.join(folder, PTH_NAME), "w") as f:
                    f.write(PTH_LINE)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH_NAME)]


setup(cmdclass={"build_py": BuildPyWithPth})
