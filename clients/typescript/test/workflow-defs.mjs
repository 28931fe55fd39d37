// Workflows the durable-function tests run in a worker process of their own (workflow-proc.mjs)
// and in the test's process alike.
import { appendFileSync, existsSync } from "node:fs";
import { join } from "node:path";

/**
 * Five steps, each logging its run to DIR/log. Step 3 waits two minutes (the test kills the
 * process meanwhile) unless DIR/go exists. With input 1 the result is 89.
 */
export const fiveSteps = (dir) => async (ctx, input) => {
  let acc = input;
  for (let i = 1; i <= 5; i++) {
    acc = await ctx.step(`s${i}`, async () => {
      appendFileSync(join(dir, "log"), `s${i}\n`);
      if (i === 3 && !existsSync(join(dir, "go"))) {
        process.stdout.write("in step 3\n");
        await new Promise((r) => setTimeout(r, 120_000));
      }
      return acc * 2 + i;
    });
  }
  return acc;
};
