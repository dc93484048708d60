"""The Module API (``mx.mod``): Module, BucketingModule, SequentialModule, PythonModule,
PythonLossModule, DetModule and the BaseModule they implement.

The file names follow MXNet's (``base_module``, ``module``, ``bucketing_module``,
``executor_group``, ``sequential_module``, ``python_module``) so that user code importing
``mxnet.module.executor_group.DataParallelExecutorGroup`` finds the same names here.
"""
from .base_module import BaseModule
from .module import Module
from .bucketing_module import BucketingModule
from .sequential_module import SequentialModule
from .python_module import PythonModule, PythonLossModule
from .det_module import DetModule

__all__ = ["BaseModule", "Module", "BucketingModule", "SequentialModule", "PythonModule",
           "PythonLossModule", "DetModule"]
