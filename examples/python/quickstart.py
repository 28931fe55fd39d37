from docket_client import Client, Worker

client = Client()  # $DOCKET_SERVER, else http://127.0.0.1:7070; token from $DOCKET_TOKEN
task = client.enqueue("greet", {"name": "Ada"}, queue="quickstart")
worker = Worker(queue="quickstart")


@worker.task("greet")
async def greet(job):
    worker.stop()  # one task is enough for a quickstart: finish it, then stop
    return f"hello, {job.payload['name']}"


worker.run()  # until stop(), SIGTERM or Ctrl-C
print(client.get_task(task["id"])["result"])  # hello, Ada
