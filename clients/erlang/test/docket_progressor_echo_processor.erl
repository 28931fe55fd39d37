%% A processor that does what progressor's prg_echo_processor does, for the tests (written
%% from its behaviour, not its code). Whatever the task, it appends one event: payload
%% term_to_binary({bin, <8 random bytes>}), metadata #{<<"format_version">> => 1}. While the
%% history it is given holds fewer or more than 10 events it also sets a timer for now, so
%% timers follow one another; the step that finds 10 events appends the 11th and sets none.
%% Started by init, a process so ends with 11 events after 10 timer steps.
-module(docket_progressor_echo_processor).

-export([process/3]).

-define(STOP_AT, 10).

process({_TaskType, _Args, #{history := History}}, _Options, _Context) ->
    Now = erlang:system_time(second),
    Count = length(History),
    Event = #{
        event_id => Count + 1,
        timestamp => Now,
        metadata => #{<<"format_version">> => 1},
        payload => term_to_binary({bin, crypto:strong_rand_bytes(8)})
    },
    case Count of
        ?STOP_AT -> {ok, #{events => [Event]}};
        _ -> {ok, #{events => [Event], action => #{set_timer => Now}}}
    end.
