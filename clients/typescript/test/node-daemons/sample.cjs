'use strict';

// node-daemons' example worker (seed 003, workers/sample.js), moved to docket: its import of
// TaskWorker changed, and bluebird's Promise.resolve().delay(30000) became a 300 ms timer
// (bluebird is not installed here, and the test should be quick; any promise does).
const { TaskWorker } = require('@docket/client'); // was: const TaskWorker = require('../components/task_worker');

class Sample extends TaskWorker {

    handleTask(task) {
        this.logger.info('Sample Task:', task);
        return new Promise(resolve => setTimeout(resolve, 300));
    }

}

module.exports = Sample;
