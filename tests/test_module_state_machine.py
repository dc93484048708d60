"""The Module lifecycle as a hypothesis state machine (lightmod.testing.module_machine).

Random networks on 1-3 devices go through bind / init_params / set_params / init_optimizer /
forward / forward_backward / update / reshape / get_params / checkpoint round trips in any
order, wrong orders included; after every step MXNet's rules are checked against a float64
reference. The number of examples is bounded so the run stays short in CI.
"""
from lightmod.testing._profile import settings_for
from lightmod.testing.module_machine import ModuleStateMachine

TestModuleLifecycle = ModuleStateMachine.TestCase
TestModuleLifecycle.settings = settings_for(20, profile="lightmod-ci", stateful_step_count=25)
