import assert from "node:assert/strict";
import { test } from "node:test";
import { findModuleClasses, moduleClassAt } from "../probe/moduleClasses";

const SOURCE = `import torch
from torch import nn
import torch.nn as tnn


class Block(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x


class Deeper(Block):
    pass


class Config:
    size = 3


class Plain(object):
    class Inner(tnn.Module):
        def forward(self, x):
            return x

    def method(self):
        pass


class Lit(pl.LightningModule, metaclass=Meta):
    pass
`;

void test("finds nn.Module subclasses, including subclasses of the file's own modules", () => {
  const names = findModuleClasses(SOURCE).map((moduleClass) => moduleClass.name);
  assert.deepEqual(names, ["Block", "Deeper", "Inner", "Lit"]);
});

void test("the class under the cursor is the innermost enclosing module class", () => {
  const classes = findModuleClasses(SOURCE);
  const lines = SOURCE.split("\n");
  const lineOf = (text: string): number => lines.findIndex((line) => line.includes(text));
  assert.equal(moduleClassAt(SOURCE, classes, lineOf("return x"))?.name, "Block");
  assert.equal(moduleClassAt(SOURCE, classes, lineOf("class Deeper"))?.name, "Deeper");
  assert.equal(moduleClassAt(SOURCE, classes, lineOf("size = 3")), undefined);
  assert.equal(moduleClassAt(SOURCE, classes, lineOf("class Inner") + 2)?.name, "Inner");
  // Back in Plain's body, below Inner: Plain is no module, so nothing.
  assert.equal(moduleClassAt(SOURCE, classes, lineOf("def method")), undefined);
  assert.equal(moduleClassAt(SOURCE, classes, 0), undefined);
});
